/* The peers from the libraries `make peers` builds: BoringSSL ("boringssl") and AWS-LC ("awslc"),
 * each a libcrypto.so named by $AESGEN_BORINGSSL_LIB / $AESGEN_AWSLC_LIB (aesgen.bench.peer_libs).
 *
 * Each is loaded with dlopen(RTLD_LOCAL | RTLD_DEEPBIND): its own calls bind to its own symbols, not
 * to those of OpenSSL's libcrypto.so.3 already in the process. GCM and GCM-SIV go through EVP_AEAD
 * (EVP_AEAD_CTX_seal_scatter / open_gather: one call per message, the tag apart), the API that reaches
 * their VAES code; ECB, CTR32, CBC and XTS through the EVP cipher calls of the openssl peer (setup_evp).
 * Before each size is timed, a peer's output (and GCM tag) must equal aesgen's for the same key,
 * nonce and message, or it reads n/a. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

const char *const DL_PEERS[] = {"boringssl", "awslc", NULL};

/* The EVP_AEAD calls (the same in BoringSSL and AWS-LC) */
typedef const void *(*aead_fn)(void);
typedef void *(*aead_ctx_new_fn)(const void *aead, const uint8_t *key, size_t key_len, size_t tag_len);
typedef int (*seal_scatter_fn)(const void *ctx, uint8_t *out, uint8_t *out_tag, size_t *out_tag_len,
                               size_t max_out_tag_len, const uint8_t *nonce, size_t nonce_len, const uint8_t *in,
                               size_t in_len, const uint8_t *extra_in, size_t extra_in_len, const uint8_t *ad,
                               size_t ad_len);

typedef int (*open_gather_fn)(const void *ctx, uint8_t *out, const uint8_t *nonce, size_t nonce_len,
                               const uint8_t *in, size_t in_len, const uint8_t *in_tag, size_t in_tag_len,
                               const uint8_t *ad, size_t ad_len);

struct aead {
    void *ctx;
    seal_scatter_fn seal_scatter;
    open_gather_fn open_gather;
};

/* The ops timed through EVP_AEAD (the rest through the EVP cipher calls). */
static int is_aead_op(void) { return !strncmp(op, "gcm_", 4) || !strcmp(op, "gcmsiv_encrypt"); }

static int aead_seal(void *self, const uint8_t *in, uint8_t *out, size_t len) {
    struct aead *a = self;
    size_t tag_len;
    return a->seal_scatter(a->ctx, out, aead_tag, &tag_len, 16, gcm_iv, 12, in, len, NULL, 0, NULL, 0) == 1 ? 0 : 1;
}

static int aead_run(void *self, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv) {
    struct aead *a = self;
    (void)iv;
    if (is_aead_decrypt())
        return a->open_gather(a->ctx, out, gcm_iv, 12, in, len, aead_tag, 16, NULL, 0) == 1 ? 0 : 1;
    return aead_seal(self, in, out, len);
}

static const char *setup_aead(struct impl *im, void *h) {
    char name[32];
    int siv = !strcmp(op, "gcmsiv_encrypt");
    snprintf(name, sizeof name, "EVP_aead_aes_%u_gcm%s", keybits, siv ? "_siv" : "");
    aead_fn aead = (aead_fn)dlsym(h, name);
    aead_ctx_new_fn ctx_new = (aead_ctx_new_fn)dlsym(h, "EVP_AEAD_CTX_new");
    struct aead *a = calloc(1, sizeof *a);
    a->seal_scatter = (seal_scatter_fn)dlsym(h, "EVP_AEAD_CTX_seal_scatter");
    a->open_gather = (open_gather_fn)dlsym(h, "EVP_AEAD_CTX_open_gather");
    if (!aead || !ctx_new || !a->seal_scatter || (is_aead_decrypt() && !a->open_gather))
        return keybits == 192 ? (siv ? "no AES-192-GCM-SIV AEAD" : "no AES-192-GCM AEAD") : "EVP_AEAD symbols missing";
    a->ctx = ctx_new(aead(), user_key, keybits / 8, 16);
    if (!a->ctx) return "EVP_AEAD_CTX_new failed";
    im->run = aead_run;
    if (is_aead_decrypt()) im->seal = aead_seal;
    im->self = a;
    return NULL;
}

/* Which of the library's code paths this op takes here, by the library's own CPU checks (restated from
 * its source: BoringSSL crypto/fipsmodule/aes/gcm.cc.inc and cpu_intel.cc; AWS-LC
 * crypto/fipsmodule/modes/gcm.c and aes/internal.h), on what the CPU reports. */
/* A flag aesgen's CPU view hides (AESGEN_BENCH_CPU_MASK, /proc/cpuinfo spelling, from peer_view.py):
 * the library was told so through OPENSSL_ia32cap. Compared without underscores (avx512_vbmi2). */
static void squeeze(char *dst, const char *src, size_t n) {
    size_t j = 0;
    for (size_t i = 0; i < n && src[i] && j < 63; i++)
        if (src[i] != '_') dst[j++] = src[i];
    dst[j] = 0;
}

static int masked(const char *feature) {
    const char *mask = getenv("AESGEN_BENCH_CPU_MASK");
    char want[64], item[64];
    squeeze(want, feature, strlen(feature));
    while (mask && *mask) {
        const char *end = strchr(mask, ',');
        squeeze(item, mask, end ? (size_t)(end - mask) : strlen(mask));
        if (!strcmp(item, want)) return 1;
        mask = end ? end + 1 : NULL;
    }
    return 0;
}

static int cpu_has(const char *const *features) {
    for (; *features; features++) {
        if (masked(*features)) return 0;
        int has = !strcmp(*features, "aes") ? __builtin_cpu_supports("aes")
                : !strcmp(*features, "avx2") ? __builtin_cpu_supports("avx2")
                : !strcmp(*features, "bmi2") ? __builtin_cpu_supports("bmi2")
                : !strcmp(*features, "vaes") ? __builtin_cpu_supports("vaes")
                : !strcmp(*features, "vpclmulqdq") ? __builtin_cpu_supports("vpclmulqdq")
                : !strcmp(*features, "avx512f") ? __builtin_cpu_supports("avx512f")
                : !strcmp(*features, "avx512dq") ? __builtin_cpu_supports("avx512dq")
                : !strcmp(*features, "avx512bw") ? __builtin_cpu_supports("avx512bw")
                : !strcmp(*features, "avx512vl") ? __builtin_cpu_supports("avx512vl")
                : !strcmp(*features, "avx512vbmi2") ? __builtin_cpu_supports("avx512vbmi2") : 0;
        if (!has) return 0;
    }
    return 1;
}

/* BoringSSL keeps off zmm registers on Intel's Skylake-server to Tiger Lake (family 6). */
static int boringssl_avoids_zmm(void) {
    static const unsigned models[] = {85, 106, 108, 125, 126, 140, 141};
    unsigned a, b, c, d, family, model;
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0));
    int intel = b == 0x756e6547 && d == 0x49656e69 && c == 0x6c65746e; /* "GenuineIntel" */
    __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1));
    family = (a >> 8) & 15;
    model = ((a >> 4) & 15) | ((a >> 12) & 0xf0);
    for (size_t i = 0; intel && family == 6 && i < sizeof models / sizeof *models; i++)
        if (model == models[i]) return 1;
    return 0;
}

static const char *code_path(const char *peer) {
    static const char *const avx512_gcm_boringssl[] = {"aes", "vaes", "vpclmulqdq", "avx512bw", "avx512vl", "bmi2", NULL};
    static const char *const avx2_gcm[] = {"aes", "vaes", "vpclmulqdq", "avx2", NULL};
    static const char *const avx512_gcm_awslc[] = {"aes", "vaes", "vpclmulqdq", "avx512f", "avx512dq", "avx512bw",
                                                   "avx512vl", NULL};
    static const char *const avx512_xts_awslc[] = {"aes", "vaes", "vpclmulqdq", "avx512f", "avx512dq", "avx512bw",
                                                   "avx512vl", "avx512vbmi2", NULL};
    int boring = !strcmp(peer, "boringssl");
    if (!strncmp(op, "gcm_", 4)) { /* encryption and decryption take the same path */
        if (boring && cpu_has(avx512_gcm_boringssl) && !boringssl_avoids_zmm()) return "VAES AVX-512 (zmm) GCM path";
        if (boring && cpu_has(avx2_gcm)) return "VAES AVX2 (ymm) GCM path";
        if (!boring && cpu_has(avx512_gcm_awslc)) return "VAES AVX-512 GCM path";
        return "AES-NI GCM path";
    }
    if (!strncmp(op, "xts_", 4)) return cpu_has(avx512_xts_awslc) ? "VAES AVX-512 XTS path" : "AES-NI XTS path";
    return NULL; /* ECB, CTR, CBC: not told apart here */
}

static const char *unsupported(const char *peer, void *h) {
    int aead = is_aead_op(), xts = !strncmp(op, "xts_", 4);
    if (!aead && !xts && strncmp(op, "ecb_", 4) && strncmp(op, "cbc_", 4) && strcmp(op, "ctr32_encrypt"))
        return "timed for ECB, CTR32, CBC, GCM, GCM-SIV and XTS only";
    if (!strcmp(op, "cbc_encrypt_multi") || !strcmp(op, "ecb_encrypt_multikey")) return "no batched API";
    if (xts && !strcmp(peer, "boringssl")) return "BoringSSL's AES-XTS is in libdecrepit (generic code), not built";
    if (xts && keybits != 256) return "AES-256-XTS only";
    if (xts && !dlsym(h, "EVP_aes_256_xts")) return "no EVP_aes_256_xts";
    return NULL;
}

void setup_dl_peer(struct impl *im, const char *name) {
    char var[64], folder[512];
    im->name = name;
    snprintf(var, sizeof var, "AESGEN_%s_LIB", !strcmp(name, "boringssl") ? "BORINGSSL" : "AWSLC");
    const char *path = getenv(var);
    void *h = path && *path ? dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND) : NULL;
    if (!path || !*path) { im->na = "not built: run make peers"; return; }
    if (!h) { im->na = strdup(dlerror()); return; }
    if ((im->na = unsupported(name, h))) return;
    if (is_aead_op())
        im->na = setup_aead(im, h);
    else
        setup_evp(im, h, NULL);
    if (im->na) return;
    const char *(*awslc_version)(void) = (const char *(*)(void))dlsym(h, "awslc_version_string");
    snprintf(folder, sizeof folder, "%s", path);
    const char *path_taken = code_path(name);
    snprintf(im->detail, sizeof im->detail, "%s from %s, %s%s%s", awslc_version ? awslc_version() : "BoringSSL",
             basename(dirname(folder)), strstr(op, "gcm") ? "EVP_AEAD" : "EVP cipher",
             path_taken ? ", " : "", path_taken ? path_taken : "");
}

static int is_dl_peer(const struct impl *im) {
    for (const char *const *p = DL_PEERS; *p; p++)
        if (!strcmp(im->name, *p)) return 1;
    return 0;
}

void cross_check_dl_peers(struct impl *impls, int n, const uint8_t *in, size_t len) {
    char why[96];
    int any = 0, rc = 0;
    for (int i = 1; i < n; i++) any |= is_dl_peer(&impls[i]) && !impls[i].na;
    if (!any) return;
    uint8_t *want = malloc(len + 64), *got = malloc(len + 64), want_tag[16], iv[16] = {0};
    if (!want || !got) abort();
    struct impl *ours = &impls[0]; /* aesgen */
    if (!ours->na) ours->run(ours->self, in, want, len, iv);
    memcpy(want_tag, aead_tag, 16); /* decrypting: the tag every call checks */
    for (int i = 1; i < n; i++) {
        struct impl *im = &impls[i];
        if (!is_dl_peer(im) || im->na) continue;
        memset(iv, 0, 16); /* CBC / CTR: the same fresh IV as aesgen's call */
        if (!is_aead_decrypt()) memset(aead_tag, 0, 16);
        if (ours->na)
            im->na = "no aesgen output to cross-check against";
        else if ((rc = im->run(im->self, in, got, len, iv)) != 0 || memcmp(got, want, len) != 0 ||
                 (strstr(op, "gcm") && memcmp(aead_tag, want_tag, 16) != 0)) {
            if (rc && is_aead_decrypt())
                snprintf(why, sizeof why, "cross-check failed: rejected the valid %zu-byte message", len);
            else
                snprintf(why, sizeof why, "cross-check failed: output differs from aesgen's at %zu bytes", len);
            im->na = strdup(why);
        } else {
            printf("{\"impl\": \"%s\", \"size\": %zu, \"checked\": \"output equal to aesgen's\"}\n", im->name, len);
            continue;
        }
        printf("{\"impl\": \"%s\", \"na\": \"%s\"}\n", im->name, im->na);
    }
    free(want);
    free(got);
}
