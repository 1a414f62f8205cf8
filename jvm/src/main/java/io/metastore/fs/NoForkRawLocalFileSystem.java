package io.metastore.fs;

import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.FSLinkResolver;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system with permissions read and set through Java's NIO. Without
 * Hadoop's native library (which Spark's distribution does not ship) {@link RawLocalFileSystem}
 * forks {@code chmod} to set a new file's or directory's permissions, {@code ls -ld} to read
 * them and {@code readlink} to tell a symlink: processes for each checkpoint file a streaming
 * query writes and renames, dozens a micro-batch, a few milliseconds each. The files, their
 * modes and their statuses are the same; only the system calls differ.
 */
public class NoForkRawLocalFileSystem extends RawLocalFileSystem {
    private static final PosixFilePermission[] BITS = {
        PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE,
        PosixFilePermission.OTHERS_READ, PosixFilePermission.GROUP_EXECUTE,
        PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
        PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE,
        PosixFilePermission.OWNER_READ,
    };

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
        File file = pathToFile(p);
        if (!file.exists()) {
            throw new FileNotFoundException("File " + p + " does not exist");
        }
        Files.setPosixFilePermissions(file.toPath(), posix(permission.toShort()));
    }

    @Override
    public FileStatus getFileStatus(Path f) throws IOException {
        return withPermissions(super.getFileStatus(f));
    }

    @Override
    public FileStatus[] listStatus(Path f) throws IOException {
        FileStatus[] listed = super.listStatus(f);
        if (listed == null) {
            return null;
        }
        FileStatus[] statuses = new FileStatus[listed.length];
        for (int i = 0; i < listed.length; i++) {
            statuses[i] = withPermissions(listed[i]);
        }
        return statuses;
    }

    /**
     * Hadoop's status of {@code f} without following a last symlink, its target read by NIO
     * where Hadoop forks {@code readlink} ({@code FileContext}'s renames ask for it).
     */
    @Override
    public FileStatus getFileLinkStatus(Path f) throws IOException {
        FileStatus status = linkStatus(f);
        if (status.isSymlink()) {
            status.setSymlink(FSLinkResolver.qualifySymlinkTarget(getUri(), status.getPath(),
                                                                  status.getSymlink()));
        }
        return status;
    }

    @Override
    public Path getLinkTarget(Path f) throws IOException {
        return linkStatus(f).getSymlink();
    }

    private FileStatus linkStatus(Path f) throws IOException {
        java.nio.file.Path path = new File(f.toString()).toPath();
        String target = Files.isSymbolicLink(path) ? Files.readSymbolicLink(path).toString() : "";
        try {
            FileStatus status = getFileStatus(f);
            if (target.isEmpty()) {
                return status;
            }
            return new FileStatus(status.getLen(), false, status.getReplication(),
                                  status.getBlockSize(), status.getModificationTime(),
                                  status.getAccessTime(), status.getPermission(),
                                  status.getOwner(), status.getGroup(), new Path(target), f);
        } catch (FileNotFoundException e) {
            if (!target.isEmpty()) {  // a dangling link
                return new FileStatus(0, false, 0, 0, 0, 0, FsPermission.getDefault(), "", "",
                                      new Path(target), f);
            }
            throw e;
        }
    }

    /** {@code status} with its permissions, owner and group read now, by NIO (a symlink's
     * target's, as {@code java.io.File}, which Hadoop's status reads, follows links). */
    private FileStatus withPermissions(FileStatus status) throws IOException {
        File file = pathToFile(status.getPath());
        PosixFileAttributes attributes;
        try {
            attributes = Files.readAttributes(file.toPath(), PosixFileAttributes.class);
        } catch (java.nio.file.NoSuchFileException e) {
            throw new FileNotFoundException("File " + status.getPath() + " does not exist");
        }
        short mode = 0;
        Set<PosixFilePermission> permissions = attributes.permissions();
        for (int bit = 0; bit < BITS.length; bit++) {
            if (permissions.contains(BITS[bit])) {
                mode |= (short) (1 << bit);
            }
        }
        return new FileStatus(status.getLen(), status.isDirectory(), status.getReplication(),
                              status.getBlockSize(), status.getModificationTime(),
                              status.getAccessTime(), new FsPermission(mode),
                              attributes.owner().getName(), attributes.group().getName(),
                              status.isSymlink() ? status.getSymlink() : null, status.getPath());
    }

    private static Set<PosixFilePermission> posix(short mode) {
        Set<PosixFilePermission> permissions = EnumSet.noneOf(PosixFilePermission.class);
        for (int bit = 0; bit < BITS.length; bit++) {
            if ((mode & (1 << bit)) != 0) {
                permissions.add(BITS[bit]);
            }
        }
        return permissions;
    }
}
