/* aesgen benchmark harness: one call per message, timed with rdtsc, our kernel and the
 * peers alternating in the same process.
 *
 *   bench KERNEL.so PREFIX OP KEYBITS SIZES TRIALS PEERS [CPU]
 *
 * OP: ecb_encrypt ecb_decrypt ctr32_encrypt cbc_encrypt cbc_decrypt ghash polyval gcm_encrypt gcm_decrypt
 *     xts_encrypt xts_decrypt (two keys of KEYBITS each) gfdouble_le gfdouble_be (SIZE / 16 doublings)
 *     ocb_encrypt ocb_decrypt otr_encrypt otr_decrypt (12-byte nonce, no AAD, 16-byte tag; GCM the same; a
 *     decryption gets a valid message, so it does the whole work) gcmsiv_encrypt (GCM's 12-byte IV as
 *     the nonce, no AAD: the per-message key derivation, POLYVAL and CTR)
 *     rijndael256_ecb_encrypt rijndael256_ecb_decrypt (a 256-bit key whatever KEYBITS)
 *     simpira256_permute simpira256_inverse (SIZE / 32 blocks)
 *     ecb_encrypt_multikey (SIZE / 16 blocks: $AESGEN_BENCH_BLOCKS_PER_KEY blocks, default 4, under each
 *     of SIZE / 16 / that many keys), fixed_key_hash, cbc_encrypt_multi (SIZE bytes as streams of equal length, each with its
 *     own key and IV: $AESGEN_BENCH_STREAMS streams, default 16, fewer when SIZE has fewer blocks;
 *     the ipsec-mb peer submits one multi-buffer job per stream, then flushes)
 * SIZES: comma list of message sizes in bytes; PEERS: comma list of openssl, ipsec-mb,
 * openssl-noaesni (OpenSSL with AES-NI masked off, run in a child process: bench_peer_process.c),
 * boringssl, awslc (libraries built by `make peers`, named by $AESGEN_<PEER>_LIB: peers_dl.c), or "-".
 * Prints one JSON object per line: a "meta" line, then one line per (size, implementation) with
 * every sample (ticks per call, sorted): the caller pools them over runs (aesgen.bench.sampler).
 * A peer that cannot run prints {"impl": ..., "na": "why"} once.
 *
 * $AESGEN_BENCH_TSC_HZ: the TSC rate, measured by an earlier run; without it the run measures it (50 ms).
 * $AESGEN_BENCH_OUT_OFFSET (required): the output buffer's offset past the input's, modulo 4 KiB
 * (place_buffers); every timed row repeats the offset the buffers really had.
 *
 *   bench --serve-peer openssl-noaesni OP KEYBITS     (the child side; see bench_peer_process.c)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#include "bench.h"

#if defined(__has_include)
#if __has_include(<intel-ipsec-mb.h>)
#include <intel-ipsec-mb.h>
#define HAVE_IPSEC_MB 1
#endif
#endif

const char *op;
unsigned keybits;
uint8_t user_key[64]; /* XTS: the data key, then the tweak key */
uint8_t aead_tag[16];

static int is_block_op(void) { return strcmp(op, "ctr32_encrypt") != 0; }
static int is_xts_op(void) { return strncmp(op, "xts_", 4) == 0; }
static int is_doubling_op(void) { return strncmp(op, "gfdouble_", 9) == 0; }
static const uint8_t xts_tweak[16] = {0x5a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xa5};
static int is_hash_op(void) { return strcmp(op, "ghash") == 0 || strcmp(op, "polyval") == 0; }
static int is_gcm_op(void) { return strncmp(op, "gcm_", 4) == 0; } /* gcm_encrypt, gcm_decrypt */
static int is_gcmsiv_op(void) { return strcmp(op, "gcmsiv_encrypt") == 0; }
const uint8_t gcm_iv[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
static int is_decrypt(void) { return strstr(op, "decrypt") != NULL; }
static int is_ocb_op(void) { return strncmp(op, "ocb_", 4) == 0; }
static int is_otr_op(void) { return strncmp(op, "otr_", 4) == 0; }
int is_aead_decrypt(void) { return (is_gcm_op() || is_ocb_op() || is_otr_op()) && is_decrypt(); }
static int is_multikey_op(void) { return strcmp(op, "ecb_encrypt_multikey") == 0; }
static int is_multi_cbc_op(void) { return strcmp(op, "cbc_encrypt_multi") == 0; }
static int is_hash_block_op(void) { return strcmp(op, "fixed_key_hash") == 0; }
#define MAX_STREAMS 256
#define NO_BATCH "no multi-key ECB / fixed-key hash API in OpenSSL / intel-ipsec-mb"
/* cbc_encrypt_multi: how many streams a message of len bytes is cut into */
static size_t multi_streams(size_t len) {
    const char *env = getenv("AESGEN_BENCH_STREAMS");
    size_t n = env ? strtoull(env, NULL, 10) : 16, blocks = len / 16;
    if (n < 1) n = 1;
    if (n > MAX_STREAMS) n = MAX_STREAMS;
    while (n > 1 && blocks % n) n--;
    return n;
}
/* stream s's key: the user key with its first byte changed, so every stream has its own */
static void stream_key(uint8_t *k, size_t s) {
    memcpy(k, user_key, 32);
    k[0] ^= (uint8_t)s;
    k[1] ^= (uint8_t)(s >> 8);
}
static const uint8_t aead_nonce[12] = {0xa0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0x0b};
static const uint8_t *aead_nonce_of_op(void) { return is_gcm_op() ? gcm_iv : aead_nonce; }
#define NO_OTR "no AES-OTR in OpenSSL / intel-ipsec-mb"
/* OpenSSL 3.2 and later have AES-GCM-SIV as an EVP cipher to fetch (not wired here); 3.0 and
 * intel-ipsec-mb have none. BoringSSL and AWS-LC have it as an EVP_AEAD (peers_dl.c). */
#define NO_GCMSIV "no AES-GCM-SIV in OpenSSL's EVP here / intel-ipsec-mb"
/* 256-bit blocks: Rijndael-256 (keyed) and Simpira-256 (a keyless permutation) */
static int is_rijndael256_op(void) { return strncmp(op, "rijndael256_", 12) == 0; }
static int is_simpira_op(void) { return strncmp(op, "simpira256_", 11) == 0; }
static int is_wide_op(void) { return is_rijndael256_op() || is_simpira_op(); }
#define NO_WIDE "no Rijndael-256 / Simpira in OpenSSL / intel-ipsec-mb"

/* ---------------------------------------------------------------- ours */
struct ours {
    void *key;
    uint8_t h[16], acc[16];
    void (*ghash)(const void *, uint8_t *, const uint8_t *, size_t);
    void (*polyval)(const uint8_t *, uint8_t *, const uint8_t *, size_t);
    int (*gcm)(const void *, const uint8_t *, size_t, const uint8_t *, size_t, const uint8_t *, uint8_t *,
               size_t, uint8_t *, size_t);
    /* (skey, nonce[12], aad, aadlen, in, out, len, tag[16]) */
    int (*gcmsiv)(const void *, const uint8_t *, const uint8_t *, size_t, const uint8_t *, uint8_t *, size_t,
                  uint8_t *);
    void (*blocks)(const void *, const uint8_t *, uint8_t *, size_t);
    void (*chained)(const void *, const uint8_t *, uint8_t *, size_t, uint8_t *);
    void (*xts)(const void *, const uint8_t *, uint8_t *, size_t, const uint8_t *);
    void (*gfdouble)(const uint8_t *, uint8_t *, size_t);
    void (*permute)(const uint8_t *, uint8_t *, size_t); /* simpira256_permute */
    void (*wide)(const void *, const uint8_t *, uint8_t *, size_t); /* rijndael256_ecb_encrypt */
    /* OCB: (okey, nonce, noncelen, aad, aadlen, in, out, len, tag, taglen); OTR the same, no taglen */
    int (*ocb)(const void *, const uint8_t *, size_t, const uint8_t *, size_t, const uint8_t *, uint8_t *,
               size_t, uint8_t *, size_t);
    int (*otr)(const void *, const uint8_t *, size_t, const uint8_t *, size_t, const uint8_t *, uint8_t *,
               size_t, uint8_t *);
    void *seal_fn; /* the matching encryption, for an AEAD decryption's valid message */
    /* batched kernels: the multikey schedule (room for MAX_KEYS keys), or per-stream schedules */
    void (*multikey)(const void *, unsigned, const uint8_t *, uint8_t *, size_t);
    int (*set_keys)(const uint8_t *, unsigned, unsigned, void *);
    void (*multi_cbc)(const void *const *, const uint8_t *const *, uint8_t *const *, size_t, uint8_t *const *,
                      unsigned);
    void *stream_keys[MAX_STREAMS];
    uint8_t ivs[MAX_STREAMS][16];
    unsigned nkeys; /* keys in the multikey schedule now */
};
#define MAX_KEYS 4096

static void ours_multikey(struct ours *o, const uint8_t *in, uint8_t *out, size_t len) {
    const char *env = getenv("AESGEN_BENCH_BLOCKS_PER_KEY");
    size_t blocks = len / 16, bpk = env ? strtoull(env, NULL, 10) : 4;
    if (bpk < 1 || bpk > blocks) bpk = 1;
    unsigned nkeys = (unsigned)(blocks / bpk);
    if (nkeys > MAX_KEYS) abort();
    if (nkeys != o->nkeys) { /* untimed the first time (warm-up): the keys are set up per size */
        static uint8_t users[MAX_KEYS * 32];
        for (unsigned k = 0; k < nkeys; k++) stream_key(users + 32 * k, k);
        o->set_keys(users, keybits, nkeys, o->key);
        o->nkeys = nkeys;
    }
    o->multikey(o->key, nkeys, in, out, bpk);
}

static void ours_multi_cbc(struct ours *o, const uint8_t *in, uint8_t *out, size_t len) {
    size_t n = multi_streams(len), per = len / n;
    const uint8_t *ins[MAX_STREAMS];
    uint8_t *outs[MAX_STREAMS], *ivs[MAX_STREAMS];
    for (size_t s = 0; s < n; s++) {
        ins[s] = in + s * per;
        outs[s] = out + s * per;
        ivs[s] = o->ivs[s]; /* a chain carried from call to call, like a stream of messages */
    }
    o->multi_cbc((const void *const *)o->stream_keys, ins, outs, per / 16, ivs, (unsigned)n);
}

static int ours_run(void *self, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv) {
    struct ours *o = self;
    size_t n = is_block_op() ? len / 16 : len;
    if (o->ocb) return o->ocb(o->key, aead_nonce, 12, NULL, 0, in, out, len, aead_tag, 16);
    if (o->otr) return o->otr(o->key, aead_nonce, 12, NULL, 0, in, out, len, aead_tag);
    if (o->ghash) { o->ghash(o->key, o->acc, in, len / 16); return 0; }
    if (o->polyval) { o->polyval(o->h, o->acc, in, len / 16); return 0; }
    if (o->gcm) return o->gcm(o->key, gcm_iv, 12, NULL, 0, in, out, len, aead_tag, 16) == 0 ? 0 : 1;
    if (o->gcmsiv) return o->gcmsiv(o->key, gcm_iv, NULL, 0, in, out, len, aead_tag) == 0 ? 0 : 1;
    if (o->xts) { o->xts(o->key, in, out, len, xts_tweak); return 0; }
    if (o->gfdouble) { o->gfdouble(xts_tweak, out, len / 16); return 0; }
    if (o->multikey) { ours_multikey(o, in, out, len); return 0; }
    if (o->multi_cbc) { ours_multi_cbc(o, in, out, len); return 0; }
    if (o->permute) { o->permute(in, out, len / 32); return 0; }
    if (o->wide) { o->wide(o->key, in, out, len / 32); return 0; }
    if (o->blocks)
        o->blocks(o->key, in, out, n);
    else
        o->chained(o->key, in, out, n, iv);
    return 0;
}

static int ours_seal(void *self, const uint8_t *pt, uint8_t *ct, size_t len) {
    struct ours *o = self;
    if (is_gcm_op() || is_ocb_op())
        return ((int (*)(const void *, const uint8_t *, size_t, const uint8_t *, size_t, const uint8_t *, uint8_t *,
                         size_t, uint8_t *, size_t))o->seal_fn)(o->key, aead_nonce_of_op(), 12, NULL, 0, pt, ct, len,
                                                                aead_tag, 16);
    return ((int (*)(const void *, const uint8_t *, size_t, const uint8_t *, size_t, const uint8_t *, uint8_t *,
                     size_t, uint8_t *))o->seal_fn)(o->key, aead_nonce, 12, NULL, 0, pt, ct, len, aead_tag);
}

static void setup_ours(struct impl *im, const char *so, const char *prefix) {
    static struct ours o;
    char name[256];
    im->name = "aesgen";
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!h) { im->na = "cannot load the kernel"; return; }
    snprintf(name, sizeof name, "%s_cpu_supported", prefix);
    int (*supported)(void) = (int (*)(void))dlsym(h, name);
    if (!supported || !supported()) { im->na = "CPU lacks the kernel's features"; return; }
    snprintf(name, sizeof name, "%s_%s", prefix,
             strcmp(op, "ghash") == 0 || is_gcm_op() ? "gcm_set_key" : is_gcmsiv_op() ? "gcmsiv_set_key"
             : is_xts_op() ? "xts_set_key" : is_multikey_op() ? "set_encrypt_keys" : is_ocb_op() ? "ocb_set_key"
             : is_otr_op() ? "otr_set_key"
             : is_rijndael256_op() ? (is_decrypt() ? "rijndael256_set_decrypt_key" : "rijndael256_set_encrypt_key")
             : is_decrypt() ? "set_decrypt_key" : "set_encrypt_key");
    void *setter = dlsym(h, name);
    int (*set_key)(const uint8_t *, unsigned, void *) =
        is_xts_op() || is_multikey_op() || is_multi_cbc_op() ? NULL : (int (*)(const uint8_t *, unsigned, void *))setter;
    snprintf(name, sizeof name, "%s_%s", prefix, op);
    void *fn = dlsym(h, name);
    int keyless = strcmp(op, "polyval") == 0 || is_doubling_op() || is_simpira_op();
    if (!fn || (!setter && !keyless)) { im->na = "kernel lacks this function"; return; }
    if (is_aead_decrypt()) { /* the encryption makes the valid message the decryption is timed on */
        snprintf(name, sizeof name, "%s_%s", prefix, is_gcm_op() ? "gcm_encrypt" : is_ocb_op() ? "ocb_encrypt" : "otr_encrypt");
        o.seal_fn = dlsym(h, name);
        if (!o.seal_fn) { im->na = "kernel lacks the matching encryption"; return; }
        im->seal = ours_seal;
    }
    if (posix_memalign(&o.key, 64, is_multikey_op() ? MAX_KEYS * 256 : 65536)) abort();
    if (set_key && set_key(user_key, is_rijndael256_op() ? 256 : keybits, o.key) != 0) {
        im->na = "the kernel refuses this key size";
        return;
    }
    memcpy(o.h, user_key, 16);
    if (is_xts_op()) {
        int (*xts_set_key)(const uint8_t *, const uint8_t *, unsigned, void *, int) =
            (int (*)(const uint8_t *, const uint8_t *, unsigned, void *, int))setter;
        xts_set_key(user_key, user_key + keybits / 8, keybits, o.key, !is_decrypt());
        o.xts = (void (*)(const void *, const uint8_t *, uint8_t *, size_t, const uint8_t *))fn;
    } else if (is_multikey_op()) {
        o.set_keys = (int (*)(const uint8_t *, unsigned, unsigned, void *))setter;
        o.multikey = (void (*)(const void *, unsigned, const uint8_t *, uint8_t *, size_t))fn;
    } else if (is_multi_cbc_op()) {
        for (size_t st = 0; st < MAX_STREAMS; st++) {
            uint8_t k[32];
            stream_key(k, st);
            if (posix_memalign(&o.stream_keys[st], 64, 4096)) abort();
            ((int (*)(const uint8_t *, unsigned, void *))setter)(k, keybits, o.stream_keys[st]);
        }
        o.multi_cbc = (void (*)(const void *const *, const uint8_t *const *, uint8_t *const *, size_t,
                                uint8_t *const *, unsigned))fn;
    } else if (is_doubling_op())
        o.gfdouble = (void (*)(const uint8_t *, uint8_t *, size_t))fn;
    else if (is_simpira_op())
        o.permute = (void (*)(const uint8_t *, uint8_t *, size_t))fn;
    else if (is_rijndael256_op())
        o.wide = (void (*)(const void *, const uint8_t *, uint8_t *, size_t))fn;
    else if (is_ocb_op())
        o.ocb = (int (*)(const void *, const uint8_t *, size_t, const uint8_t *, size_t, const uint8_t *, uint8_t *,
                         size_t, uint8_t *, size_t))fn;
    else if (is_otr_op())
        o.otr = (int (*)(const void *, const uint8_t *, size_t, const uint8_t *, size_t, const uint8_t *, uint8_t *,
                         size_t, uint8_t *))fn;
    else if (strcmp(op, "ghash") == 0)
        o.ghash = (void (*)(const void *, uint8_t *, const uint8_t *, size_t))fn;
    else if (is_gcm_op())
        o.gcm = (int (*)(const void *, const uint8_t *, size_t, const uint8_t *, size_t, const uint8_t *,
                         uint8_t *, size_t, uint8_t *, size_t))fn;
    else if (is_gcmsiv_op())
        o.gcmsiv = (int (*)(const void *, const uint8_t *, const uint8_t *, size_t, const uint8_t *, uint8_t *,
                            size_t, uint8_t *))fn;
    else if (strcmp(op, "polyval") == 0)
        o.polyval = (void (*)(const uint8_t *, uint8_t *, const uint8_t *, size_t))fn;
    else if (strncmp(op, "ecb", 3) == 0 || is_hash_block_op())
        o.blocks = (void (*)(const void *, const uint8_t *, uint8_t *, size_t))fn;
    else
        o.chained = (void (*)(const void *, const uint8_t *, uint8_t *, size_t, uint8_t *))fn;
    im->run = ours_run;
    im->self = &o;
}

/* ---------------------------------------------------------------- OpenSSL EVP */
#define EVP_CTRL_AEAD_SET_IVLEN 0x9
#define EVP_CTRL_AEAD_GET_TAG 0x10
#define EVP_CTRL_AEAD_SET_TAG 0x11

typedef int (*evp_init_fn)(void *, const void *, void *, const uint8_t *, const uint8_t *);
typedef int (*evp_update_fn)(void *, uint8_t *, int *, const uint8_t *, int);
typedef int (*evp_final_fn)(void *, uint8_t *, int *);
typedef int (*evp_ctrl_fn)(void *, int, int, void *);

struct ossl {
    void *ctx;
    const uint8_t *nonce; /* AEAD (GCM, OCB): set again for every message; NULL otherwise */
    int chained;
    evp_init_fn init;
    evp_update_fn update;
    evp_final_fn final;
    evp_ctrl_fn ctrl;
    /* AEAD decryption: an encrypting context of the same cipher, to make a valid message */
    void *seal_ctx;
    evp_init_fn seal_init;
    evp_update_fn seal_update;
    evp_final_fn seal_final;
};

static int ossl_run(void *self, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv) {
    struct ossl *s = self;
    int outl, fin;
    if (is_xts_op()) iv = (uint8_t *)xts_tweak; /* one data unit per message, the same tweak as ours */
    if (s->nonce) { /* one message: nonce, (decryption: the tag to check), text, final, (encryption: tag) */
        s->init(s->ctx, NULL, NULL, NULL, s->nonce);
        if (is_decrypt()) s->ctrl(s->ctx, EVP_CTRL_AEAD_SET_TAG, 16, aead_tag);
        s->update(s->ctx, out, &outl, in, (int)len);
        fin = s->final(s->ctx, out + outl, &outl);
        if (!is_decrypt()) s->ctrl(s->ctx, EVP_CTRL_AEAD_GET_TAG, 16, aead_tag);
        return fin > 0 ? 0 : 1;
    }
    if (s->chained) s->init(s->ctx, NULL, NULL, NULL, iv); /* fresh IV per message */
    s->update(s->ctx, out, &outl, in, (int)len);
    return 0;
}

static int ossl_seal(void *self, const uint8_t *pt, uint8_t *ct, size_t len) {
    struct ossl *s = self;
    int outl, fin;
    s->seal_init(s->seal_ctx, NULL, NULL, NULL, s->nonce);
    s->seal_update(s->seal_ctx, ct, &outl, pt, (int)len);
    fin = s->seal_final(s->seal_ctx, ct + outl, &outl);
    s->ctrl(s->seal_ctx, EVP_CTRL_AEAD_GET_TAG, 16, aead_tag);
    return fin > 0 ? 0 : 1;
}

/* An EVP context for `cipher`, keyed; AEAD: the nonce length and the 16-byte tag set first. */
static void *evp_context(void *(*ctx_new)(void), const void *cipher, evp_init_fn init, evp_ctrl_fn ctrl,
                         const uint8_t *nonce, size_t noncelen) {
    void *ctx = ctx_new();
    uint8_t iv[16] = {0};
    if (nonce) {
        init(ctx, cipher, NULL, NULL, NULL);
        ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, (int)noncelen, NULL);
        if (is_ocb_op()) ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, 16, NULL); /* OCB: the tag length, before the key */
        init(ctx, NULL, NULL, user_key, nonce);
    } else
        init(ctx, cipher, NULL, user_key, iv);
    return ctx;
}

/* The EVP cipher peer over libcrypto `h` (OpenSSL's, or a peer library of peers_dl.c); `no_lib`: why h is NULL. */
void setup_evp(struct impl *im, void *h, const char *no_lib) {
    struct ossl *s = calloc(1, sizeof *s);
    if (!im->name) im->name = "openssl";
    if (is_hash_op()) { im->na = "no standalone GHASH/POLYVAL in EVP"; return; }
    if (is_gcmsiv_op()) { im->na = NO_GCMSIV; return; }
    if (is_doubling_op()) { im->na = "no GF(2^128) doubling in EVP"; return; }
    if (is_otr_op()) { im->na = NO_OTR; return; }
    if (is_multikey_op() || is_hash_block_op()) { im->na = NO_BATCH; return; }
    if (is_multi_cbc_op()) { im->na = "no multi-buffer CBC in EVP"; return; }
    if (is_wide_op()) { im->na = NO_WIDE; return; }
    if (is_xts_op() && keybits == 192) { im->na = "OpenSSL has no AES-192-XTS"; return; }
    if (!h) { im->na = no_lib; return; }
    void *(*ctx_new)(void) = (void *(*)(void))dlsym(h, "EVP_CIPHER_CTX_new");
    int (*set_padding)(void *, int) = (int (*)(void *, int))dlsym(h, "EVP_CIPHER_CTX_set_padding");
    const char *(*version)(int) = (const char *(*)(int))dlsym(h, "OpenSSL_version");
    char cname[32];
    const char *m = strncmp(op, "ecb", 3) == 0 ? "ecb" : strncmp(op, "cbc", 3) == 0 ? "cbc"
                  : is_gcm_op() ? "gcm" : is_xts_op() ? "xts" : is_ocb_op() ? "ocb" : "ctr";
    s->nonce = is_gcm_op() || is_ocb_op() ? aead_nonce_of_op() : NULL;
    s->final = (evp_final_fn)dlsym(h, is_decrypt() ? "EVP_DecryptFinal_ex" : "EVP_EncryptFinal_ex");
    s->ctrl = (evp_ctrl_fn)dlsym(h, "EVP_CIPHER_CTX_ctrl");
    snprintf(cname, sizeof cname, "EVP_aes_%u_%s", keybits, m);
    const void *(*cipher)(void) = (const void *(*)(void))dlsym(h, cname);
    s->init = (evp_init_fn)dlsym(h, is_decrypt() ? "EVP_DecryptInit_ex" : "EVP_EncryptInit_ex");
    s->update = (evp_update_fn)dlsym(h, is_decrypt() ? "EVP_DecryptUpdate" : "EVP_EncryptUpdate");
    if (!ctx_new || !cipher || !s->init || !s->update || !s->final || !s->ctrl) { im->na = "EVP symbols missing"; return; }
    s->ctx = evp_context(ctx_new, cipher(), s->init, s->ctrl, s->nonce, 12);
    if (set_padding) set_padding(s->ctx, 0);
    if (is_aead_decrypt()) {
        s->seal_init = (evp_init_fn)dlsym(h, "EVP_EncryptInit_ex");
        s->seal_update = (evp_update_fn)dlsym(h, "EVP_EncryptUpdate");
        s->seal_final = (evp_final_fn)dlsym(h, "EVP_EncryptFinal_ex");
        s->seal_ctx = evp_context(ctx_new, cipher(), s->seal_init, s->ctrl, s->nonce, 12);
        im->seal = ossl_seal;
    }
    s->chained = strcmp(m, "ecb") != 0;
    im->run = ossl_run;
    im->self = s;
    snprintf(im->detail, sizeof im->detail, "%s", version ? version(0) : "OpenSSL");
}

void setup_openssl(struct impl *im) {
    setup_evp(im, dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL), "libcrypto.so.3 not found (apt install libssl-dev)");
}

/* ---------------------------------------------------------------- intel-ipsec-mb */
#ifdef HAVE_IPSEC_MB
struct imb {
    IMB_MGR *mgr;
    uint32_t enc[60] __attribute__((aligned(64)));
    uint32_t dec[60] __attribute__((aligned(64)));
    IMB_CIPHER_MODE mode;
};

static struct gcm_key_data imb_gkey __attribute__((aligned(64)));
static struct gcm_context_data imb_gctx;

/* The manager's one-call GCM function for the key size (what IMB_AES<bits>_GCM_ENC/DEC call). */
static aes_gcm_enc_dec_t imb_gcm_fn(const struct imb *s, int dec) {
    if (keybits == 128) return dec ? s->mgr->gcm128_dec : s->mgr->gcm128_enc;
    if (keybits == 192) return dec ? s->mgr->gcm192_dec : s->mgr->gcm192_enc;
    return dec ? s->mgr->gcm256_dec : s->mgr->gcm256_enc;
}

/* Decrypting, intel-ipsec-mb returns the tag it computed; the caller compares it (as an
 * application must), all 16 bytes, without an early exit. */
static int imb_gcm_run(void *self, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv) {
    struct imb *s = self;
    uint8_t tag[16], diff = 0;
    (void)iv;
    int dec = is_decrypt();
    imb_gcm_fn(s, dec)(&imb_gkey, &imb_gctx, out, in, len, gcm_iv, NULL, 0, dec ? tag : aead_tag, 16);
    if (!dec) return 0;
    for (int i = 0; i < 16; i++) diff |= tag[i] ^ aead_tag[i];
    return diff != 0;
}

static int imb_gcm_seal(void *self, const uint8_t *pt, uint8_t *ct, size_t len) {
    imb_gcm_fn(self, 0)(&imb_gkey, &imb_gctx, ct, pt, len, gcm_iv, NULL, 0, aead_tag, 16);
    return 0;
}

static uint8_t imb_tag[16];

static int imb_ghash_run(void *self, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv) {
    struct imb *s = self;
    (void)out; (void)iv;
    IMB_GHASH(s->mgr, &imb_gkey, in, len, imb_tag, 16);
    return 0;
}

static int imb_run(void *self, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv) {
    struct imb *s = self;
    IMB_JOB *job = IMB_GET_NEXT_JOB(s->mgr);
    int dec = is_decrypt();
    job->cipher_direction = dec ? IMB_DIR_DECRYPT : IMB_DIR_ENCRYPT;
    job->chain_order = dec ? IMB_ORDER_HASH_CIPHER : IMB_ORDER_CIPHER_HASH;
    job->hash_alg = IMB_AUTH_NULL;
    job->cipher_mode = s->mode;
    job->enc_keys = s->enc;
    job->dec_keys = s->dec;
    job->key_len_in_bytes = keybits / 8;
    job->src = in;
    job->dst = out;
    job->cipher_start_src_offset_in_bytes = 0;
    job->msg_len_to_cipher_in_bytes = len;
    job->iv = iv;
    job->iv_len_in_bytes = s->mode == IMB_CIPHER_ECB ? 0 : 16;
    job = IMB_SUBMIT_JOB(s->mgr);
    while (job == NULL && (job = IMB_FLUSH_JOB(s->mgr)) == NULL)
        ;
    /* not completed (e.g. a length the job API does not take): minus the job status */
    return job->status == IMB_STATUS_COMPLETED ? 0 : -(int)job->status;
}

/* cbc_encrypt_multi: one job per stream (its own key and IV), submitted back to back, then flushed:
 * the manager runs up to its lane count of streams at once (multi-buffer). */
static struct {
    uint32_t enc[MAX_STREAMS][60] __attribute__((aligned(64)));
    uint32_t dec[MAX_STREAMS][60] __attribute__((aligned(64)));
    uint8_t iv[MAX_STREAMS][16];
} imb_streams;

static int imb_multi_cbc_run(void *self, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv) {
    struct imb *s = self;
    size_t n = multi_streams(len), per = len / n;
    (void)iv;
    for (size_t st = 0; st < n; st++) {
        IMB_JOB *job = IMB_GET_NEXT_JOB(s->mgr);
        job->cipher_direction = IMB_DIR_ENCRYPT;
        job->chain_order = IMB_ORDER_CIPHER_HASH;
        job->hash_alg = IMB_AUTH_NULL;
        job->cipher_mode = IMB_CIPHER_CBC;
        job->enc_keys = imb_streams.enc[st];
        job->dec_keys = imb_streams.dec[st];
        job->key_len_in_bytes = keybits / 8;
        job->src = in + st * per;
        job->dst = out + st * per;
        job->cipher_start_src_offset_in_bytes = 0;
        job->msg_len_to_cipher_in_bytes = per;
        job->iv = imb_streams.iv[st];
        job->iv_len_in_bytes = 16;
        IMB_SUBMIT_JOB(s->mgr);
    }
    while (IMB_FLUSH_JOB(s->mgr) != NULL)
        ;
    return 0;
}

static void setup_ipsec(struct impl *im) {
    static struct imb s;
    static const char *arch[] = {"none", "noaesni", "sse", "avx", "avx2", "avx512"};
    im->name = "ipsec-mb";
    /* AESGEN_BENCH_IPSEC_ARCH (peer_view.py): the architecture aesgen's CPU view allows, when a
     * mask hides features the library's own detection would use. */
    const char *want = getenv("AESGEN_BENCH_IPSEC_ARCH");
    s.mgr = alloc_mb_mgr(want && !strcmp(want, "noaesni") ? IMB_FLAG_AESNI_OFF : 0);
    if (!s.mgr) { im->na = "alloc_mb_mgr failed"; return; }
    IMB_ARCH a;
    if (!want || !strcmp(want, "avx512")) init_mb_mgr_auto(s.mgr, &a);
    else if (!strcmp(want, "avx2")) { init_mb_mgr_avx2(s.mgr); a = IMB_ARCH_AVX2; }
    else if (!strcmp(want, "avx")) { init_mb_mgr_avx(s.mgr); a = IMB_ARCH_AVX; }
    else { init_mb_mgr_sse(s.mgr); a = strcmp(want, "noaesni") ? IMB_ARCH_SSE : IMB_ARCH_NOAESNI; }
    if (keybits == 128) IMB_AES_KEYEXP_128(s.mgr, user_key, s.enc, s.dec);
    else if (keybits == 192) IMB_AES_KEYEXP_192(s.mgr, user_key, s.enc, s.dec);
    else IMB_AES_KEYEXP_256(s.mgr, user_key, s.enc, s.dec);
    if (strcmp(op, "polyval") == 0) { im->na = "no POLYVAL"; return; }
    if (is_gcmsiv_op()) { im->na = NO_GCMSIV; return; }
    /* intel-ipsec-mb 1.3's IMB_CIPHER_MODE has no XTS; a later header with IMB_CIPHER_XTS would need a job here */
    if (is_xts_op()) { im->na = "no XTS in intel-ipsec-mb " IMB_VERSION_STR; return; }
    if (is_doubling_op()) { im->na = "no GF(2^128) doubling API"; return; }
    /* intel-ipsec-mb 1.3's IMB_CIPHER_MODE and hash algorithms have no OCB (nor any AES-OTR) */
    if (is_ocb_op()) { im->na = "no OCB in intel-ipsec-mb " IMB_VERSION_STR; return; }
    if (is_otr_op()) { im->na = NO_OTR; return; }
    if (is_multikey_op() || is_hash_block_op()) { im->na = NO_BATCH; return; }
    if (is_multi_cbc_op()) {
        for (size_t st = 0; st < MAX_STREAMS; st++) {
            uint8_t k[32];
            stream_key(k, st);
            if (keybits == 128) IMB_AES_KEYEXP_128(s.mgr, k, imb_streams.enc[st], imb_streams.dec[st]);
            else if (keybits == 192) IMB_AES_KEYEXP_192(s.mgr, k, imb_streams.enc[st], imb_streams.dec[st]);
            else IMB_AES_KEYEXP_256(s.mgr, k, imb_streams.enc[st], imb_streams.dec[st]);
        }
        im->run = imb_multi_cbc_run;
        im->self = &s;
        snprintf(im->detail, sizeof im->detail, "intel-ipsec-mb %s, %s path, multi-buffer CBC (a job per stream)",
                 imb_get_version_str(), a < sizeof arch / sizeof *arch ? arch[a] : "?");
        return;
    }
    if (is_wide_op()) { im->na = NO_WIDE; return; }
    if (is_gcm_op()) {
        if (keybits == 128) IMB_AES128_GCM_PRE(s.mgr, user_key, &imb_gkey);
        else if (keybits == 192) IMB_AES192_GCM_PRE(s.mgr, user_key, &imb_gkey);
        else IMB_AES256_GCM_PRE(s.mgr, user_key, &imb_gkey);
        im->run = imb_gcm_run;
        if (is_decrypt()) im->seal = imb_gcm_seal;
        im->self = &s;
        snprintf(im->detail, sizeof im->detail, "intel-ipsec-mb %s, %s path", imb_get_version_str(),
                 a < sizeof arch / sizeof *arch ? arch[a] : "?");
        return;
    }
    if (strcmp(op, "ghash") == 0) {
        IMB_GHASH_PRE(s.mgr, user_key, &imb_gkey);
        im->run = imb_ghash_run;
        im->self = &s;
        snprintf(im->detail, sizeof im->detail, "intel-ipsec-mb %s, %s path", imb_get_version_str(),
                 a < sizeof arch / sizeof *arch ? arch[a] : "?");
        return;
    }
    s.mode = strncmp(op, "ecb", 3) == 0 ? IMB_CIPHER_ECB
           : strncmp(op, "cbc", 3) == 0 ? IMB_CIPHER_CBC : IMB_CIPHER_CNTR;
    im->run = imb_run;
    im->self = &s;
    snprintf(im->detail, sizeof im->detail, "intel-ipsec-mb %s, %s path", imb_get_version_str(),
             a < sizeof arch / sizeof *arch ? arch[a] : "?");
}
#else
static void setup_ipsec(struct impl *im) {
    im->name = "ipsec-mb";
    if (is_otr_op()) { im->na = NO_OTR; return; }
    if (is_gcmsiv_op()) { im->na = NO_GCMSIV; return; }
    if (is_wide_op()) { im->na = NO_WIDE; return; }
    im->na = "built without intel-ipsec-mb.h (apt install libipsec-mb-dev)";
}
#endif

/* ---------------------------------------------------------------- timing */
uint64_t ticks(void) {
    unsigned aux;
    uint64_t t = __rdtscp(&aux);
    _mm_lfence();
    return t;
}

static double tsc_hz(void) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC_RAW, &a);
    uint64_t t0 = ticks();
    do clock_gettime(CLOCK_MONOTONIC_RAW, &b);
    while ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec) < 50e6);
    uint64_t t1 = ticks();
    return (t1 - t0) / ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9);
}

/* Keep the core busy for ns nanoseconds: what a run needs before timing when the TSC rate is
 * already known ($AESGEN_BENCH_TSC_HZ, from the caller's first round), so the clock is up. */
static void spin(double ns) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC_RAW, &a);
    do clock_gettime(CLOCK_MONOTONIC_RAW, &b);
    while ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec) < ns);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* bench --ceiling CEIL.so NAME... : ticks per instruction of each microbenchmark loop. */
static int ceiling(int argc, char **argv) {
    void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "cannot load %s: %s\n", argv[2], dlerror()); return 2; }
    double hz = tsc_hz();
    printf("{\"meta\": true, \"tsc_hz\": %.0f}\n", hz);
    /* Each loop iteration runs 48 instructions (ceiling.py PER_ITERATION: 12 chains unrolled 4
     * times); a trial of 500 iterations lasts a few microseconds, as one kernel call does, so a
     * neighbour or an interrupt spoils few trials and the median sees through them. */
    enum { TRIALS = 101 };
    const uint64_t iters = 500;
    for (int i = 3; i < argc; i++) {
        void (*loop)(uint64_t) = (void (*)(uint64_t))dlsym(h, argv[i]);
        if (!loop) { printf("{\"name\": \"%s\", \"na\": \"missing\"}\n", argv[i]); continue; }
        double best[TRIALS];
        loop(iters); /* warm-up: wide units powered, code and branch predictors primed */
        for (int t = 0; t < TRIALS; t++) {
            uint64_t t0 = ticks();
            loop(iters);
            best[t] = (double)(ticks() - t0) / (iters * 48.0);
        }
        printf("{\"name\": \"%s\", \"samples\": [", argv[i]);
        for (int t = 0; t < TRIALS; t++) printf("%s%.4f", t ? ", " : "", best[t]);
        qsort(best, TRIALS, sizeof *best, cmp_double);
        printf("], \"min_ticks\": %.4f, \"median_ticks\": %.4f}\n", best[0], best[TRIALS / 2]);
    }
    return 0;
}

#define PAGE 4096 /* the placement's period: 4 KiB aliasing compares the low 12 address bits */
size_t out_offset;

int read_out_offset(void) {
    const char *placed = getenv("AESGEN_BENCH_OUT_OFFSET");
    char *end = NULL;
    out_offset = placed && *placed ? strtoull(placed, &end, 10) : PAGE;
    if (end && *end == '\0' && out_offset < PAGE) return 0;
    fprintf(stderr, "AESGEN_BENCH_OUT_OFFSET: the output's offset past the input within a 4 KiB page, 0..4095\n");
    return -1;
}

uint8_t *place_buffers(size_t len, uint8_t **in, uint8_t **out) {
    size_t span = (len + 64 + PAGE - 1) / PAGE * PAGE;
    uint8_t *arena;
    if (posix_memalign((void **)&arena, PAGE, 2 * span + PAGE)) abort();
    /* Every page of the arena written once, the slack around the buffers too: a never-touched
     * page next to a buffer cost our AVX-512 OCB 12% in this VM (docs/tuning.md). */
    memset(arena, 0, 2 * span + PAGE);
    *in = arena;
    *out = arena + span + out_offset;
    return arena;
}

void prepare_message(struct impl *impls, int n, uint8_t *in, size_t len) {
    for (size_t i = 0; i < len; i++) in[i] = (uint8_t)i;
    if (!is_aead_decrypt()) return;
    for (int i = 0; i < n; i++) {
        if (impls[i].na || !impls[i].seal) continue;
        uint8_t *ct = malloc(len + 1);
        if (!ct) abort();
        impls[i].seal(impls[i].self, in, ct, len);
        memcpy(in, ct, len);
        free(ct);
        return;
    }
}

/* One untimed call first: what ran before (another implementation's sample, the ceiling's
 * loops) must not decide this sample. Measured on an Emerald Rapids-class core: a zmm ECB
 * timed right after 9 calls of an xmm (SSE) ECB ran 5% slower (0.1261 against 0.1203 ticks/B),
 * after one call of its own as fast as alone, and `aesgen bench` read it at 95% of the
 * ceiling beside ipsec-mb, BoringSSL or AWS-LC, 100% alone. */
double time_calls(struct impl *im, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv, int reps) {
    im->run(im->self, in, out, len, iv);
    uint64_t t0 = ticks();
    for (int r = 0; r < reps; r++) im->run(im->self, in, out, len, iv);
    uint64_t t1 = ticks();
    return (double)(t1 - t0) / reps;
}

void fill_user_key(void) {
    for (int i = 0; i < 32; i++) user_key[i] = (uint8_t)(i * 7 + 1);
}

/* Is `name` one of the comma list `list`? ("openssl" is not "openssl-noaesni".) */
static int listed(const char *list, const char *name) {
    size_t k = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += k)
        if ((p == list || p[-1] == ',') && (p[k] == ',' || p[k] == '\0')) return 1;
    return 0;
}

/* A peer that refuses a message size (returns non-zero; not an AEAD decryption, which
 * check_accepts handles) is not timed at that size: it would be timed on its early exit. */
static int refuses(struct impl *im, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv) {
    int rc;
    if (is_aead_decrypt() || im->na || im->process || (rc = im->run(im->self, in, out, len, iv)) == 0) return 0;
    if (strcmp(im->name, "ipsec-mb") == 0) /* imb_run returns minus the job status */
        printf("{\"impl\": \"%s\", \"size\": %zu, \"refused\": \"job status %d, not completed\"}\n", im->name, len, -rc);
    else
        printf("{\"impl\": \"%s\", \"size\": %zu, \"refused\": \"the call returned %d\"}\n", im->name, len, rc);
    return 1;
}

/* A decryption must accept the valid message, or it would be timed on its early exit. */
static void check_accepts(struct impl *im, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv) {
    static char why[96];
    if (!is_aead_decrypt() || im->na || im->process || im->run(im->self, in, out, len, iv) == 0) return;
    snprintf(why, sizeof why, "rejected the valid %zu-byte message", len);
    im->na = why;
    printf("{\"impl\": \"%s\", \"na\": \"%s\"}\n", im->name, im->na);
}

static void warm(struct impl *im, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv, int calls) {
    if (im->process)
        peer_process_warm(im, calls);
    else
        for (int r = 0; r < calls; r++) im->run(im->self, in, out, len, iv);
}

int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "--ceiling") == 0) return ceiling(argc, argv);
    if (argc > 4 && strcmp(argv[1], "--serve-peer") == 0) return serve_peer_process(argc, argv);
    if (argc < 8) {
        fprintf(stderr, "usage: bench KERNEL.so PREFIX OP KEYBITS SIZES TRIALS PEERS [CPU]\n");
        return 2;
    }
    if (read_out_offset()) return 2;
    op = argv[3];
    keybits = (unsigned)atoi(argv[4]);
    int trials = atoi(argv[6]);
    if (argc > 8) { /* before any peer process starts: it inherits the CPU */
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(atoi(argv[8]), &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    fill_user_key();

    struct impl impls[MAX_IMPLS];
    memset(impls, 0, sizeof impls);
    int n = 0;
    setup_ours(&impls[n++], argv[1], argv[2]);
    if (listed(argv[7], "openssl")) setup_openssl(&impls[n++]);
    if (listed(argv[7], "ipsec-mb")) setup_ipsec(&impls[n++]);
    if (listed(argv[7], "openssl-noaesni")) start_noaesni_openssl(&impls[n++]);
    for (const char *const *p = DL_PEERS; *p; p++)
        if (listed(argv[7], *p)) setup_dl_peer(&impls[n++], *p);

    const char *known_hz = getenv("AESGEN_BENCH_TSC_HZ"); /* later rounds skip the 50 ms calibration */
    double hz = known_hz ? (spin(5e6), atof(known_hz)) : tsc_hz();
    printf("{\"meta\": true, \"op\": \"%s\", \"key_bits\": %u, \"tsc_hz\": %.0f, \"trials\": %d, \"out_offset\": %zu}\n",
           op, keybits, hz, trials, out_offset);
    for (int i = 0; i < n; i++) {
        if (impls[i].na)
            printf("{\"impl\": \"%s\", \"na\": \"%s\"}\n", impls[i].name, impls[i].na);
        else if (impls[i].detail[0])
            printf("{\"impl\": \"%s\", \"detail\": \"%s\"}\n", impls[i].name, impls[i].detail);
    }

    char *sizes = strdup(argv[5]);
    uint8_t *in, *out, iv[16] = {0};
    for (char *tok = strtok(sizes, ","); tok; tok = strtok(NULL, ",")) {
        size_t len = strtoull(tok, NULL, 10);
        uint8_t *arena = place_buffers(len, &in, &out);
        prepare_message(impls, n, in, len);
        cross_check_dl_peers(impls, n, in, len);
        int skip[MAX_IMPLS] = {0};
        for (int i = 0; i < n; i++) {
            if (impls[i].process && !impls[i].na) peer_process_size(&impls[i], len);
            check_accepts(&impls[i], in, out, len, iv);
            skip[i] = impls[i].na != NULL || refuses(&impls[i], in, out, len, iv);
        }
        /* Repetitions per sample: about 20k TSC ticks of work, at least one call. */
        int reps = (int)(20000 / (len / 8.0 + 60));
        if (reps < 1) reps = 1;
        double *samples = calloc((size_t)n * trials, sizeof *samples);
        for (int w = 0; w < 3; w++) /* warm caches, predictors and frequency */
            for (int i = 0; i < n; i++)
                if (!skip[i]) warm(&impls[i], in, out, len, iv, reps * 4);
        for (int t = 0; t < trials; t++) { /* alternating: each implementation takes one sample in turn */
            for (int i = 0; i < n; i++) {
                if (skip[i]) continue;
                samples[i * trials + t] = impls[i].process ? peer_process_time(&impls[i], reps)
                                                           : time_calls(&impls[i], in, out, len, iv, reps);
            }
        }
        for (int i = 0; i < n; i++) {
            if (skip[i]) continue;
            double *s = samples + i * trials;
            qsort(s, trials, sizeof *s, cmp_double);
            printf("{\"impl\": \"%s\", \"size\": %zu, \"min_ticks\": %.2f, \"median_ticks\": %.2f, \"reps\": %d, "
                   "\"out_offset\": %zu, \"samples\": [", impls[i].name, len, s[0], s[trials / 2], reps,
                   (size_t)((uintptr_t)out - (uintptr_t)in) % PAGE);
            for (int t = 0; t < trials; t++) printf("%s%.2f", t ? ", " : "", s[t]); /* for the caller's interval */
            printf("]}\n");
        }
        free(samples);
        free(arena);
    }
    for (int i = 0; i < n; i++)
        if (impls[i].process) peer_process_stop(&impls[i]);
    return 0;
}
