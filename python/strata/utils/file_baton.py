"""strata.utils.file_baton: a lock between processes made of a file's existence
(torch.utils.file_baton): whoever creates the file holds the baton."""

import os
import time
import warnings

__all__ = ["FileBaton"]


class FileBaton:
    def __init__(self, lock_file_path, wait_seconds=0.1, warn_after_seconds=None):
        self.lock_file_path = lock_file_path
        self.wait_seconds = wait_seconds
        self.fd = None
        self.warn_after_seconds = warn_after_seconds

    def try_acquire(self):
        """Creates the lock file if absent (atomically) and returns True; False if it exists."""
        try:
            self.fd = os.open(self.lock_file_path, os.O_CREAT | os.O_EXCL)
            return True
        except FileExistsError:
            return False

    def wait(self):
        """Sleeps until the lock file is gone, warning once after warn_after_seconds."""
        start, warned = time.time(), False
        while os.path.exists(self.lock_file_path):
            time.sleep(self.wait_seconds)
            if (self.warn_after_seconds is not None and not warned
                    and time.time() - start > self.warn_after_seconds):
                warnings.warn(f'Waited on lock file "{self.lock_file_path}" for {self.warn_after_seconds} seconds.',
                              stacklevel=2)
                warned = True

    def release(self):
        """Closes and deletes the lock file."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        os.remove(self.lock_file_path)
