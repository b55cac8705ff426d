/* LD_PRELOAD shim for the fault-injection suite: write(2), pwrite(2) and
 * writev(2) to a file whose path matches the glob in FAIL_WRITES_MATCHING
 * fail, as on a full disk (ENOSPC, the default), a read-only file system
 * (FAIL_WRITES_ERRNO=EROFS) or a failing one (FAIL_WRITES_ERRNO=EIO).
 * Built by the test with the system C compiler. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* The errno to fail with when `descriptor` names a matching file, else 0. */
static int failure_for(int descriptor) {
  const char* pattern = getenv("FAIL_WRITES_MATCHING");
  if (!pattern || descriptor <= 2) return 0;
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", descriptor);
  const ssize_t length = readlink(link, path, sizeof path - 1);
  if (length <= 0) return 0;
  path[length] = '\0';
  if (fnmatch(pattern, path, 0) != 0) return 0;
  const char* code = getenv("FAIL_WRITES_ERRNO");
  if (code && strcmp(code, "EROFS") == 0) return EROFS;
  if (code && strcmp(code, "EIO") == 0) return EIO;
  return ENOSPC;
}

ssize_t write(int descriptor, const void* data, size_t size) {
  static ssize_t (*real_write)(int, const void*, size_t);
  if (!real_write) real_write = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  const int failure = failure_for(descriptor);
  if (failure) {
    errno = failure;
    return -1;
  }
  return real_write(descriptor, data, size);
}

ssize_t pwrite(int descriptor, const void* data, size_t size, off_t offset) {
  static ssize_t (*real_pwrite)(int, const void*, size_t, off_t);
  if (!real_pwrite) real_pwrite = (ssize_t(*)(int, const void*, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
  const int failure = failure_for(descriptor);
  if (failure) {
    errno = failure;
    return -1;
  }
  return real_pwrite(descriptor, data, size, offset);
}

ssize_t pwrite64(int descriptor, const void* data, size_t size, off_t offset) {
  return pwrite(descriptor, data, size, offset);
}

ssize_t writev(int descriptor, const struct iovec* vectors, int count) {
  static ssize_t (*real_writev)(int, const struct iovec*, int);
  if (!real_writev) real_writev = (ssize_t(*)(int, const struct iovec*, int))dlsym(RTLD_NEXT, "writev");
  const int failure = failure_for(descriptor);
  if (failure) {
    errno = failure;
    return -1;
  }
  return real_writev(descriptor, vectors, count);
}
