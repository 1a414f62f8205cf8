package io.metastore.fs;

import org.apache.hadoop.fs.LocalFileSystem;

/** Hadoop's checksummed local file system ({@code fs.file.impl}) over
 * {@link NoForkRawLocalFileSystem}. */
public class NoForkLocalFileSystem extends LocalFileSystem {
    public NoForkLocalFileSystem() {
        super(new NoForkRawLocalFileSystem());
    }
}
