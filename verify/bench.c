/* aesgen benchmark harness: one call per message, timed with rdtsc, our kernel and the
 * peers alternating in the same process.
 *
 *   bench KERNEL.so PREFIX OP KEYBITS SIZES TRIALS PEERS [CPU]
 *
 * OP: ecb_encrypt ecb_decrypt ctr32_encrypt cbc_encrypt cbc_decrypt ghash polyval gcm_encrypt
 *     xts_encrypt xts_decrypt (two keys of KEYBITS each) gfdouble_le gfdouble_be (SIZE / 16 doublings)
 * SIZES: comma list of message sizes in bytes; PEERS: comma list of openssl, ipsec-mb (or "-").
 * Prints one JSON object per line: a "meta" line, then one line per (size, implementation).
 * A peer that cannot run prints {"impl": ..., "na": "why"} once.
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

#if defined(__has_include)
#if __has_include(<intel-ipsec-mb.h>)
#include <intel-ipsec-mb.h>
#define HAVE_IPSEC_MB 1
#endif
#endif

typedef void (*run_fn)(void *self, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv);

struct impl {
    const char *name;
    run_fn run;
    void *self;
    const char *na; /* why it cannot run, or NULL */
    char detail[96];
};

static const char *op;
static unsigned keybits;
static uint8_t user_key[64]; /* XTS: the data key, then the tweak key */

static int is_block_op(void) { return strcmp(op, "ctr32_encrypt") != 0; }
static int is_xts_op(void) { return strncmp(op, "xts_", 4) == 0; }
static int is_doubling_op(void) { return strncmp(op, "gfdouble_", 9) == 0; }
static const uint8_t xts_tweak[16] = {0x5a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xa5};
static int is_hash_op(void) { return strcmp(op, "ghash") == 0 || strcmp(op, "polyval") == 0; }
static int is_gcm_op(void) { return strcmp(op, "gcm_encrypt") == 0; }
static const uint8_t gcm_iv[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
static uint8_t gcm_tag[16];
static int is_decrypt(void) { return strstr(op, "decrypt") != NULL; }

/* ---------------------------------------------------------------- ours */
struct ours {
    void *key;
    uint8_t h[16], acc[16];
    void (*ghash)(const void *, uint8_t *, const uint8_t *, size_t);
    void (*polyval)(const uint8_t *, uint8_t *, const uint8_t *, size_t);
    int (*gcm)(const void *, const uint8_t *, size_t, const uint8_t *, size_t, const uint8_t *, uint8_t *,
               size_t, uint8_t *, size_t);
    void (*blocks)(const void *, const uint8_t *, uint8_t *, size_t);
    void (*chained)(const void *, const uint8_t *, uint8_t *, size_t, uint8_t *);
    void (*xts)(const void *, const uint8_t *, uint8_t *, size_t, const uint8_t *);
    void (*gfdouble)(const uint8_t *, uint8_t *, size_t);
};

static void ours_run(void *self, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv) {
    struct ours *o = self;
    size_t n = is_block_op() ? len / 16 : len;
    if (o->ghash) { o->ghash(o->key, o->acc, in, len / 16); return; }
    if (o->polyval) { o->polyval(o->h, o->acc, in, len / 16); return; }
    if (o->gcm) { o->gcm(o->key, gcm_iv, 12, NULL, 0, in, out, len, gcm_tag, 16); return; }
    if (o->xts) { o->xts(o->key, in, out, len, xts_tweak); return; }
    if (o->gfdouble) { o->gfdouble(xts_tweak, out, len / 16); return; }
    if (o->blocks)
        o->blocks(o->key, in, out, n);
    else
        o->chained(o->key, in, out, n, iv);
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
             strcmp(op, "ghash") == 0 || is_gcm_op() ? "gcm_set_key"
             : is_xts_op() ? "xts_set_key" : is_decrypt() ? "set_decrypt_key" : "set_encrypt_key");
    void *setter = dlsym(h, name);
    int (*set_key)(const uint8_t *, unsigned, void *) = is_xts_op() ? NULL : (int (*)(const uint8_t *, unsigned, void *))setter;
    snprintf(name, sizeof name, "%s_%s", prefix, op);
    void *fn = dlsym(h, name);
    int keyless = strcmp(op, "polyval") == 0 || is_doubling_op();
    if (!fn || (!setter && !keyless)) { im->na = "kernel lacks this function"; return; }
    if (posix_memalign(&o.key, 64, 65536)) abort();
    if (set_key) set_key(user_key, keybits, o.key);
    memcpy(o.h, user_key, 16);
    if (is_xts_op()) {
        int (*xts_set_key)(const uint8_t *, const uint8_t *, unsigned, void *, int) =
            (int (*)(const uint8_t *, const uint8_t *, unsigned, void *, int))setter;
        xts_set_key(user_key, user_key + keybits / 8, keybits, o.key, !is_decrypt());
        o.xts = (void (*)(const void *, const uint8_t *, uint8_t *, size_t, const uint8_t *))fn;
    } else if (is_doubling_op())
        o.gfdouble = (void (*)(const uint8_t *, uint8_t *, size_t))fn;
    else if (strcmp(op, "ghash") == 0)
        o.ghash = (void (*)(const void *, uint8_t *, const uint8_t *, size_t))fn;
    else if (is_gcm_op())
        o.gcm = (int (*)(const void *, const uint8_t *, size_t, const uint8_t *, size_t, const uint8_t *,
                         uint8_t *, size_t, uint8_t *, size_t))fn;
    else if (strcmp(op, "polyval") == 0)
        o.polyval = (void (*)(const uint8_t *, uint8_t *, const uint8_t *, size_t))fn;
    else if (strncmp(op, "ecb", 3) == 0)
        o.blocks = (void (*)(const void *, const uint8_t *, uint8_t *, size_t))fn;
    else
        o.chained = (void (*)(const void *, const uint8_t *, uint8_t *, size_t, uint8_t *))fn;
    im->run = ours_run;
    im->self = &o;
}

/* ---------------------------------------------------------------- OpenSSL EVP */
struct ossl {
    void *ctx;
    int gcm;
    int (*final)(void *, uint8_t *, int *);
    int (*ctrl)(void *, int, int, void *);
    int (*init)(void *, const void *, void *, const uint8_t *, const uint8_t *);
    int (*update)(void *, uint8_t *, int *, const uint8_t *, int);
    int chained;
};

static void ossl_run(void *self, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv) {
    struct ossl *s = self;
    int outl;
    if (is_xts_op()) iv = (uint8_t *)xts_tweak; /* one data unit per message, the same tweak as ours */
    if (s->gcm) { /* one message: IV, text, tag */
        s->init(s->ctx, NULL, NULL, NULL, gcm_iv);
        s->update(s->ctx, out, &outl, in, (int)len);
        s->final(s->ctx, out + outl, &outl);
        s->ctrl(s->ctx, 0x10 /* EVP_CTRL_AEAD_GET_TAG */, 16, gcm_tag);
        return;
    }
    if (s->chained) s->init(s->ctx, NULL, NULL, NULL, iv); /* fresh IV per message */
    s->update(s->ctx, out, &outl, in, (int)len);
}

static void setup_openssl(struct impl *im) {
    static struct ossl s;
    im->name = "openssl";
    if (is_hash_op()) { im->na = "no standalone GHASH/POLYVAL in EVP"; return; }
    if (is_doubling_op()) { im->na = "no GF(2^128) doubling in EVP"; return; }
    if (is_xts_op() && keybits == 192) { im->na = "OpenSSL has no AES-192-XTS"; return; }
    void *h = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!h) { im->na = "libcrypto.so.3 not found (apt install libssl-dev)"; return; }
    void *(*ctx_new)(void) = (void *(*)(void))dlsym(h, "EVP_CIPHER_CTX_new");
    int (*set_padding)(void *, int) = (int (*)(void *, int))dlsym(h, "EVP_CIPHER_CTX_set_padding");
    const char *(*version)(int) = (const char *(*)(int))dlsym(h, "OpenSSL_version");
    char cname[32];
    const char *m = strncmp(op, "ecb", 3) == 0 ? "ecb" : strncmp(op, "cbc", 3) == 0 ? "cbc"
                  : is_gcm_op() ? "gcm" : is_xts_op() ? "xts" : "ctr";
    s.gcm = is_gcm_op();
    s.final = (int (*)(void *, uint8_t *, int *))dlsym(h, "EVP_EncryptFinal_ex");
    s.ctrl = (int (*)(void *, int, int, void *))dlsym(h, "EVP_CIPHER_CTX_ctrl");
    snprintf(cname, sizeof cname, "EVP_aes_%u_%s", keybits, m);
    const void *(*cipher)(void) = (const void *(*)(void))dlsym(h, cname);
    s.init = (int (*)(void *, const void *, void *, const uint8_t *, const uint8_t *))dlsym(
        h, is_decrypt() ? "EVP_DecryptInit_ex" : "EVP_EncryptInit_ex");
    s.update = (int (*)(void *, uint8_t *, int *, const uint8_t *, int))dlsym(
        h, is_decrypt() ? "EVP_DecryptUpdate" : "EVP_EncryptUpdate");
    if (!ctx_new || !cipher || !s.init || !s.update) { im->na = "EVP symbols missing"; return; }
    s.ctx = ctx_new();
    uint8_t iv[16] = {0};
    s.init(s.ctx, cipher(), NULL, user_key, s.gcm ? gcm_iv : iv);
    if (set_padding) set_padding(s.ctx, 0);
    s.chained = strcmp(m, "ecb") != 0;
    im->run = ossl_run;
    im->self = &s;
    snprintf(im->detail, sizeof im->detail, "%s", version ? version(0) : "OpenSSL");
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

static void imb_gcm_run(void *self, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv) {
    struct imb *s = self;
    (void)iv;
    if (keybits == 128)
        IMB_AES128_GCM_ENC(s->mgr, &imb_gkey, &imb_gctx, out, in, len, gcm_iv, NULL, 0, gcm_tag, 16);
    else if (keybits == 192)
        IMB_AES192_GCM_ENC(s->mgr, &imb_gkey, &imb_gctx, out, in, len, gcm_iv, NULL, 0, gcm_tag, 16);
    else
        IMB_AES256_GCM_ENC(s->mgr, &imb_gkey, &imb_gctx, out, in, len, gcm_iv, NULL, 0, gcm_tag, 16);
}
static uint8_t imb_tag[16];

static void imb_ghash_run(void *self, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv) {
    struct imb *s = self;
    (void)out; (void)iv;
    IMB_GHASH(s->mgr, &imb_gkey, in, len, imb_tag, 16);
}

static void imb_run(void *self, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv) {
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
}

static void setup_ipsec(struct impl *im) {
    static struct imb s;
    static const char *arch[] = {"none", "noaesni", "sse", "avx", "avx2", "avx512"};
    im->name = "ipsec-mb";
    s.mgr = alloc_mb_mgr(0);
    if (!s.mgr) { im->na = "alloc_mb_mgr failed"; return; }
    IMB_ARCH a;
    init_mb_mgr_auto(s.mgr, &a);
    if (keybits == 128) IMB_AES_KEYEXP_128(s.mgr, user_key, s.enc, s.dec);
    else if (keybits == 192) IMB_AES_KEYEXP_192(s.mgr, user_key, s.enc, s.dec);
    else IMB_AES_KEYEXP_256(s.mgr, user_key, s.enc, s.dec);
    if (strcmp(op, "polyval") == 0) { im->na = "no POLYVAL"; return; }
    /* intel-ipsec-mb 1.3's IMB_CIPHER_MODE has no XTS; a later header with IMB_CIPHER_XTS would need a job here */
    if (is_xts_op()) { im->na = "no XTS in intel-ipsec-mb " IMB_VERSION_STR; return; }
    if (is_doubling_op()) { im->na = "no GF(2^128) doubling API"; return; }
    if (is_gcm_op()) {
        if (keybits == 128) IMB_AES128_GCM_PRE(s.mgr, user_key, &imb_gkey);
        else if (keybits == 192) IMB_AES192_GCM_PRE(s.mgr, user_key, &imb_gkey);
        else IMB_AES256_GCM_PRE(s.mgr, user_key, &imb_gkey);
        im->run = imb_gcm_run;
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
    im->na = "built without intel-ipsec-mb.h (apt install libipsec-mb-dev)";
}
#endif

/* ---------------------------------------------------------------- timing */
static inline uint64_t ticks(void) {
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
    const uint64_t iters = 20000; /* each loop iteration runs 12 instructions */
    for (int i = 3; i < argc; i++) {
        void (*loop)(uint64_t) = (void (*)(uint64_t))dlsym(h, argv[i]);
        if (!loop) { printf("{\"name\": \"%s\", \"na\": \"missing\"}\n", argv[i]); continue; }
        double best[15];
        for (int t = 0; t < 15; t++) {
            uint64_t t0 = ticks();
            loop(iters);
            best[t] = (double)(ticks() - t0) / (iters * 12.0);
        }
        qsort(best, 15, sizeof *best, cmp_double);
        printf("{\"name\": \"%s\", \"min_ticks\": %.4f, \"median_ticks\": %.4f}\n", argv[i], best[0], best[7]);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "--ceiling") == 0) return ceiling(argc, argv);
    if (argc < 8) {
        fprintf(stderr, "usage: bench KERNEL.so PREFIX OP KEYBITS SIZES TRIALS PEERS [CPU]\n");
        return 2;
    }
    op = argv[3];
    keybits = (unsigned)atoi(argv[4]);
    int trials = atoi(argv[6]);
    if (argc > 8) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(atoi(argv[8]), &set);
        sched_setaffinity(0, sizeof set, &set);
    }
    for (int i = 0; i < 32; i++) user_key[i] = (uint8_t)(i * 7 + 1);

    struct impl impls[3];
    memset(impls, 0, sizeof impls);
    int n = 0;
    setup_ours(&impls[n++], argv[1], argv[2]);
    if (strstr(argv[7], "openssl")) setup_openssl(&impls[n++]);
    if (strstr(argv[7], "ipsec-mb")) setup_ipsec(&impls[n++]);

    double hz = tsc_hz();
    printf("{\"meta\": true, \"op\": \"%s\", \"key_bits\": %u, \"tsc_hz\": %.0f, \"trials\": %d}\n", op, keybits, hz,
           trials);
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
        if (posix_memalign((void **)&in, 64, len + 64) || posix_memalign((void **)&out, 64, len + 64)) abort();
        for (size_t i = 0; i < len; i++) in[i] = (uint8_t)i;
        /* Repetitions per sample: about 20k TSC ticks of work, at least one call. */
        int reps = (int)(20000 / (len / 8.0 + 60));
        if (reps < 1) reps = 1;
        double *samples = calloc((size_t)n * trials, sizeof *samples);
        for (int w = 0; w < 3; w++) /* warm caches, predictors and frequency */
            for (int i = 0; i < n; i++)
                if (!impls[i].na)
                    for (int r = 0; r < reps * 4; r++) impls[i].run(impls[i].self, in, out, len, iv);
        for (int t = 0; t < trials; t++) {
            for (int i = 0; i < n; i++) {
                if (impls[i].na) continue;
                uint64_t t0 = ticks();
                for (int r = 0; r < reps; r++) impls[i].run(impls[i].self, in, out, len, iv);
                uint64_t t1 = ticks();
                samples[i * trials + t] = (double)(t1 - t0) / reps;
            }
        }
        for (int i = 0; i < n; i++) {
            if (impls[i].na) continue;
            double *s = samples + i * trials;
            qsort(s, trials, sizeof *s, cmp_double);
            printf("{\"impl\": \"%s\", \"size\": %zu, \"min_ticks\": %.2f, \"median_ticks\": %.2f, \"reps\": %d}\n",
                   impls[i].name, len, s[0], s[trials / 2], reps);
        }
        free(samples);
        free(in);
        free(out);
    }
    return 0;
}
