#include "earshot_kernels.h"

#include "clones.h"

// A gather from several sources: see earshot_kernels.h.
CLONES
void earshot_gather_sources(const int *index, const unsigned char *which, const float *const *sources, float *y, long n) {
    for (long e = 0; e < n; e++) {
        int i = index[e];
        y[e] = i < 0 ? 0.0f : sources[which[e]][i];
    }
}
