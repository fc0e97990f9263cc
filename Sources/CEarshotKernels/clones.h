// Kernels are compiled for AVX-512 (x86-64-v4), AVX2+FMA (x86-64-v3) and a baseline, and the
// loader picks the best the CPU has (target_clones). ThreadSanitizer instruments the clones'
// resolver, which the loader runs before the sanitizer's runtime is up (a crash at start): under
// it, the baseline clone alone.
#pragma once
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EARSHOT_NO_CLONES 1
#endif
#endif
#ifdef EARSHOT_NO_CLONES
#define CLONES
#else
#define CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
