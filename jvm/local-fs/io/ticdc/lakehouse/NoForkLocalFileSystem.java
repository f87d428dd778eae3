package io.ticdc.lakehouse;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;

import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * Hadoop's local file system (checksums and all), except that it sets a file's permission bits through
 * java.nio instead of forking {@code chmod}.
 *
 * <p>Why: without Hadoop's native library (pyspark ships none), {@code RawLocalFileSystem} forks {@code chmod}
 * for every file and directory it creates. Each Iceberg commit creates a manifest, a manifest list and a metadata
 * file, so a run of hundreds of small tables forked thousands of processes (measured: about 6% of the run's
 * CPU). The bits set are the same ({@code 0666} or {@code 0777} minus Hadoop's umask); a mode with bits beyond
 * those nine (sticky, setuid) still goes through Hadoop's own code.
 *
 * <p>Selected with {@code fs.file.impl}; built by {@code make setup} (scripts/setup.sh).
 */
public class NoForkLocalFileSystem extends LocalFileSystem {

  public NoForkLocalFileSystem() {
    super(new Raw());
  }

  /** The raw (checksum-less) half: only {@code setPermission} differs from Hadoop's. */
  public static class Raw extends RawLocalFileSystem {
    private static final PosixFilePermission[] BITS = {
      PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
      PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
      PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ
    };

    public void setPermission(Path path, FsPermission permission) throws IOException {
      int mode = permission.toShort();
      if ((mode & ~0777) != 0) {
        super.setPermission(path, permission);
        return;
      }
      Set<PosixFilePermission> bits = EnumSet.noneOf(PosixFilePermission.class);
      for (int i = 0; i < BITS.length; i++) {
        if ((mode & (1 << i)) != 0) {
          bits.add(BITS[i]);
        }
      }
      Files.setPosixFilePermissions(pathToFile(path).toPath(), bits);
    }
  }
}
