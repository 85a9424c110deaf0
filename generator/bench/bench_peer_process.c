/* A peer timed in a child process of its own: OpenSSL with AES-NI and PCLMULQDQ masked off.
 *
 * libcrypto reads OPENSSL_ia32cap once, when it loads, into its capability vector; a process
 * that has loaded it already cannot mask AES-NI afterwards. So the harness starts itself again
 * (/proc/self/exe --serve-peer ...) with the variable set, pinned to the same CPU, and drives
 * it over two pipes, one line per request:
 *
 *   parent -> child        child -> parent
 *   (start)                "ok DETAIL" or "na REASON"
 *   "size N"               "ok", or "na REASON" (an AEAD decryption rejected the valid message)
 *   "warm CALLS"           "ok"
 *   "time CALLS"           TSC ticks per call over CALLS back-to-back calls
 *
 * The child times its own calls with the same rdtscp loop; the parent asks for one sample in
 * its turn, so this peer still alternates with the others, sample by sample.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

/* OpenSSL's capability vector holds CPUID.1:ECX in bits 32..63: bit 57 is ECX bit 25, AES-NI, and
 * bit 33 is ECX bit 1, PCLMULQDQ; "~" clears them. Its AES is then bsaes/vpaes, and its GHASH (GCM)
 * the 4-bit table method (gcm_ghash_4bit: loads at addresses that depend on the data). */
#define NOAESNI_MASK "~0x200000200000000"

struct peer_process {
    pid_t pid;
    FILE *to, *from;
    char reply[320];
};

/* Send one request, read the one-line reply (NULL if the child is gone). */
static const char *ask(struct peer_process *pp, const char *request) {
    if (fprintf(pp->to, "%s\n", request) < 0 || fflush(pp->to) != 0) return NULL;
    if (!fgets(pp->reply, sizeof pp->reply, pp->from)) return NULL;
    pp->reply[strcspn(pp->reply, "\n")] = '\0';
    return pp->reply;
}

/* A reply that is not "ok..." makes the peer n/a, with the child's reason. */
static int accepted(struct impl *im, const char *reply) {
    if (reply && strncmp(reply, "ok", 2) == 0) return 1;
    im->na = !reply ? "the peer process ended" : strncmp(reply, "na ", 3) == 0 ? reply + 3 : reply;
    printf("{\"impl\": \"%s\", \"na\": \"%s\"}\n", im->name, im->na);
    return 0;
}

void start_noaesni_openssl(struct impl *im) {
    static struct peer_process pp;
    int down[2], up[2];
    im->name = "openssl-noaesni";
    if (pipe(down) != 0 || pipe(up) != 0) { im->na = "cannot create the pipes to its process"; return; }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) { im->na = "cannot start its process"; return; }
    if (pid == 0) {
        char bits[16];
        dup2(down[0], STDIN_FILENO);
        dup2(up[1], STDOUT_FILENO);
        close(down[0]); close(down[1]); close(up[0]); close(up[1]);
        setenv("OPENSSL_ia32cap", NOAESNI_MASK, 1);
        snprintf(bits, sizeof bits, "%u", keybits);
        execl("/proc/self/exe", "bench", "--serve-peer", "openssl-noaesni", op, bits, (char *)NULL);
        _exit(127);
    }
    close(down[0]);
    close(up[1]);
    pp.pid = pid;
    pp.to = fdopen(down[1], "w");
    pp.from = fdopen(up[0], "r");
    im->process = &pp;
    if (!fgets(pp.reply, sizeof pp.reply, pp.from)) { im->na = "its process did not start"; return; }
    pp.reply[strcspn(pp.reply, "\n")] = '\0';
    if (strncmp(pp.reply, "na ", 3) == 0) im->na = pp.reply + 3;
    else snprintf(im->detail, sizeof im->detail, "%s", pp.reply + 3);
}

void peer_process_size(struct impl *im, size_t len) {
    char request[48];
    snprintf(request, sizeof request, "size %zu", len);
    accepted(im, ask(im->process, request));
}

void peer_process_warm(struct impl *im, int calls) {
    char request[48];
    snprintf(request, sizeof request, "warm %d", calls);
    accepted(im, ask(im->process, request));
}

double peer_process_time(struct impl *im, int calls) {
    char request[48];
    snprintf(request, sizeof request, "time %d", calls);
    const char *reply = ask(im->process, request);
    if (!reply || strncmp(reply, "ok ", 3) != 0) { accepted(im, reply); return 0.0; }
    return strtod(reply + 3, NULL);
}

void peer_process_stop(struct impl *im) {
    struct peer_process *pp = im->process;
    if (!pp || !pp->to) return;
    fclose(pp->to); /* the child reads end-of-file and exits */
    fclose(pp->from);
    waitpid(pp->pid, NULL, 0);
    pp->to = NULL;
}

/* ---------------------------------------------------------------- the child side */
int serve_peer_process(int argc, char **argv) {
    struct impl im;
    char line[64];
    uint8_t *arena = NULL, *in = NULL, *out = NULL, iv[16] = {0};
    size_t len = 0;
    (void)argc;
    memset(&im, 0, sizeof im);
    im.name = argv[2];
    op = argv[3];
    keybits = (unsigned)atoi(argv[4]);
    fill_user_key();
    if (read_out_offset()) return 2;
    const char *mask = getenv("OPENSSL_ia32cap");
    setup_openssl(&im);
    if (im.na) { printf("na %s\n", im.na); return 0; }
    printf("ok %s, AES-NI and PCLMULQDQ masked (OPENSSL_ia32cap=%s)%s, in a process of its own\n", im.detail,
           mask ? mask : "unset", strstr(op, "gcm") ? "; its GHASH is then table-based (4-bit tables, not constant-time)" : "");
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
        long arg = strtol(line + 5, NULL, 10);
        if (strncmp(line, "size ", 5) == 0) {
            free(arena);
            len = (size_t)arg;
            arena = place_buffers(len, &in, &out); /* as the parent's: the same offset (its environment) */
            prepare_message(&im, 1, in, len);
            if (is_aead_decrypt() && im.run(im.self, in, out, len, iv) != 0)
                printf("na rejected the valid %zu-byte message\n", len);
            else
                printf("ok\n");
        } else if (strncmp(line, "warm ", 5) == 0) {
            for (long r = 0; r < arg; r++) im.run(im.self, in, out, len, iv);
            printf("ok\n");
        } else if (strncmp(line, "time ", 5) == 0) {
            printf("ok %.4f\n", time_calls(&im, in, out, len, iv, (int)arg));
        } else {
            printf("na unknown request\n");
        }
        fflush(stdout);
    }
    free(arena);
    return 0;
}
