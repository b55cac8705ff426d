/* LD_PRELOAD shim for the fault-injection suite: write(2) to a file whose
 * path matches the glob in FAIL_WRITES_MATCHING fails with ENOSPC, as on a
 * full disk. Built by the test with the system C compiler. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

ssize_t write(int descriptor, const void* data, size_t size) {
  static ssize_t (*real_write)(int, const void*, size_t);
  if (!real_write) real_write = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  const char* pattern = getenv("FAIL_WRITES_MATCHING");
  if (pattern && descriptor > 2) {
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", descriptor);
    const ssize_t length = readlink(link, path, sizeof path - 1);
    if (length > 0) {
      path[length] = '\0';
      if (fnmatch(pattern, path, 0) == 0) {
        errno = ENOSPC;
        return -1;
      }
    }
  }
  return real_write(descriptor, data, size);
}
