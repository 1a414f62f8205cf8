package io.metastore.fs;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.local.LocalConfigKeys;

/**
 * The local file system as {@code FileContext} uses it ({@code fs.AbstractFileSystem.file.impl}:
 * Spark's streaming checkpoints), checksummed, over {@link NoForkRawLocalFileSystem}.
 */
public class NoForkLocalFs extends ChecksumFs {
    public NoForkLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
        super(new Raw(uri, conf));
    }

    public NoForkLocalFs(Configuration conf) throws IOException, URISyntaxException {
        this(FsConstants.LOCAL_FS_URI, conf);
    }

    /** The raw local file system as an {@code AbstractFileSystem}. */
    static final class Raw extends DelegateToFileSystem {
        Raw(URI uri, Configuration conf) throws IOException, URISyntaxException {
            super(uri, new NoForkRawLocalFileSystem(), conf, FsConstants.LOCAL_FS_URI.getScheme(),
                  false);
        }

        @Override
        public int getUriDefaultPort() {
            return -1;
        }

        @Override
        public boolean isValidName(String src) {
            return true;
        }

        @Override
        public FsServerDefaults getServerDefaults(Path f) throws IOException {
            return LocalConfigKeys.getServerDefaults();
        }

        @Override
        @Deprecated
        public FsServerDefaults getServerDefaults() throws IOException {
            return LocalConfigKeys.getServerDefaults();
        }
    }
}
