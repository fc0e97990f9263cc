// Counts malloc calls in a process (LD_PRELOAD); prints the count at exit. Used by
// tools/count_allocations.sh to measure heap allocations per model step.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
static atomic_long count;
static void *(*real_malloc)(size_t);
void *malloc(size_t n) {
    if (!real_malloc) real_malloc = dlsym(RTLD_NEXT, "malloc");
    atomic_fetch_add(&count, 1);
    return real_malloc(n);
}
__attribute__((destructor)) static void report(void) { fprintf(stderr, "malloc calls: %ld\n", (long)count); }
