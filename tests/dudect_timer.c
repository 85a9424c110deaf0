/* Times a GHASH kernel for tests/test_dudect.py: each call's key is copied into one working
 * buffer just before it (the classes differ in H alone, not in where the key lies or how warm
 * its lines are), and the call alone sits between two serialised time-stamp reads. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <x86intrin.h>

typedef void (*ghash_fn)(const void *key, void *acc, const uint8_t *data, size_t nblocks);

void dudect_time(ghash_fn ghash, void *work, size_t key_bytes, const uint8_t *const *keys,
                 const uint32_t *key_of_call, const uint32_t *blocks_of_call, void *acc,
                 const uint8_t *data, size_t calls, uint64_t *ticks) {
    unsigned aux;
    for (size_t i = 0; i < calls; i++) {
        memcpy(work, keys[key_of_call[i]], key_bytes);
        memset(acc, 0, 16);
        _mm_lfence();
        uint64_t start = __rdtsc();
        _mm_lfence();
        ghash(work, acc, data, blocks_of_call[i]);
        uint64_t end = __rdtscp(&aux);
        _mm_lfence();
        ticks[i] = end - start;
    }
}
