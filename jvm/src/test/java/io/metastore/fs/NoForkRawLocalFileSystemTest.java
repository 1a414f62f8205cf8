package io.metastore.fs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermissions;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Permissions and links through NIO read and write what Hadoop's forked tools would. */
class NoForkRawLocalFileSystemTest {
    @TempDir
    java.nio.file.Path directory;

    private NoForkRawLocalFileSystem fileSystem;

    @BeforeEach
    void open() throws IOException {
        fileSystem = new NoForkRawLocalFileSystem();
        fileSystem.initialize(java.net.URI.create("file:///"), new Configuration());
    }

    private Path path(String name) {
        return new Path(directory.resolve(name).toString());
    }

    @Test
    void aPermissionSetIsThePermissionReadBackAndOnDisk() throws IOException {
        Path file = path("offsets");
        fileSystem.create(file).close();
        fileSystem.setPermission(file, new FsPermission((short) 0640));
        assertEquals((short) 0640, fileSystem.getFileStatus(file).getPermission().toShort());
        assertEquals("rw-r-----", PosixFilePermissions.toString(
                Files.getPosixFilePermissions(directory.resolve("offsets"))));
        FileStatus[] listed = fileSystem.listStatus(new Path(directory.toString()));
        assertEquals(1, listed.length);
        assertEquals((short) 0640, listed[0].getPermission().toShort());
        assertEquals(System.getProperty("user.name"), listed[0].getOwner());
    }

    @Test
    void aMissingFilesPermissionCannotBeSet() {
        assertThrows(FileNotFoundException.class, () ->
                fileSystem.setPermission(path("absent"), FsPermission.getFileDefault()));
        assertThrows(FileNotFoundException.class, () -> fileSystem.getFileStatus(path("absent")));
    }

    @Test
    void aLinkIsToldAndItsTargetReadWithoutFollowingIt() throws IOException {
        Files.writeString(directory.resolve("target"), "x");
        Files.createSymbolicLink(directory.resolve("link"), directory.resolve("target"));
        FileStatus link = fileSystem.getFileLinkStatus(path("link"));
        assertTrue(link.isSymlink());
        assertEquals(directory.resolve("target").toString(),
                     fileSystem.getLinkTarget(path("link")).toString());
        assertFalse(fileSystem.getFileLinkStatus(path("target")).isSymlink());
        Files.createSymbolicLink(directory.resolve("dangling"), directory.resolve("gone"));
        assertTrue(fileSystem.getFileLinkStatus(path("dangling")).isSymlink());
    }
}
