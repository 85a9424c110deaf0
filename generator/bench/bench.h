/* Shared by the benchmark harness's sources: bench.c (our kernel, the in-process peers, the
 * timing loop), bench_peer_process.c (a peer timed in a child process of its own) and peers_dl.c
 * (BoringSSL and AWS-LC, loaded from the libraries `make peers` builds). */
#ifndef AESGEN_BENCH_H
#define AESGEN_BENCH_H

#include <stddef.h>
#include <stdint.h>

/* One call on one whole message; 0, or non-zero when a decryption rejected its tag. */
typedef int (*run_fn)(void *self, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv);
/* AEAD encryption of `pt` into `ct`, leaving the tag in aead_tag (to make a valid message to decrypt). */
typedef int (*seal_fn)(void *self, const uint8_t *pt, uint8_t *ct, size_t len);

struct peer_process; /* bench_peer_process.c */

struct impl {
    const char *name;
    run_fn run;
    seal_fn seal; /* NULL unless the op is an AEAD decryption */
    void *self;
    const char *na; /* why it cannot run, or NULL */
    char detail[320];
    struct peer_process *process; /* non-NULL: the calls run and are timed in that process */
};

extern const char *op;
extern unsigned keybits;
extern uint8_t user_key[64];
extern uint8_t aead_tag[16]; /* the tag an AEAD encryption wrote / a decryption checks */
extern const uint8_t gcm_iv[12]; /* GCM's nonce (and GCM-SIV's) */

int is_aead_decrypt(void);
void fill_user_key(void); /* the fixed key bytes every process uses */
void setup_openssl(struct impl *im);
void setup_evp(struct impl *im, void *libcrypto, const char *no_lib); /* the same calls, on another libcrypto */
uint64_t ticks(void);
/* Fill `in` with the message every implementation processes at this size: fixed bytes, or for an
 * AEAD decryption their encryption (by the first implementation that can seal), tag in aead_tag. */
void prepare_message(struct impl *impls, int n, uint8_t *in, size_t len);
/* The output buffer's offset past the input's within a 4 KiB page, from $AESGEN_BENCH_OUT_OFFSET
 * (required; -1 and a message without it). Where the output sits relative to the input modulo
 * 4 KiB decides whether a loop's loads meet its earlier stores' low 12 address bits (4 KiB
 * aliasing; docs/tuning.md, "Where the buffers sit"): chosen, not left to malloc. */
extern size_t out_offset;
int read_out_offset(void);
/* One page-aligned arena for a message of `len` bytes (freed by the caller), every page written
 * once: the input at its start, the output out_offset bytes past the first page boundary after
 * the input. */
uint8_t *place_buffers(size_t len, uint8_t **in, uint8_t **out);
/* TSC ticks per call over `reps` back-to-back calls. */
double time_calls(struct impl *im, const uint8_t *in, uint8_t *out, size_t len, uint8_t *iv, int reps);

/* The peer process: start it (OPENSSL_ia32cap masking AES-NI, set before its libcrypto loads),
 * then drive it size by size; it times its own calls and reports ticks per call. */
void start_noaesni_openssl(struct impl *im);
void peer_process_size(struct impl *im, size_t len);
void peer_process_warm(struct impl *im, int reps);
double peer_process_time(struct impl *im, int reps);
void peer_process_stop(struct impl *im);
int serve_peer_process(int argc, char **argv);

/* The peers from libraries `make peers` builds (peers_dl.c): their names, NULL-terminated. */
#define MAX_IMPLS 8 /* aesgen and every peer */
extern const char *const DL_PEERS[];
void setup_dl_peer(struct impl *im, const char *name);
/* Before a size is timed: a library peer whose output (or GCM tag) differs from aesgen's is n/a. */
void cross_check_dl_peers(struct impl *impls, int n, const uint8_t *in, size_t len);

#endif
