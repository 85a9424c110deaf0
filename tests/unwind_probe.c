/* For tests/test_unwind.py: does the unwind information of a kernel lead back to its caller
 * from wherever the kernel is interrupted? A profiling timer interrupts a loop of calls; when
 * the signal lands inside the kernel's shared object, the handler walks the stack with libgcc's
 * unwinder (as profilers and C++ exceptions do: .eh_frame) and counts the walks that reach
 * probe_call, the function that called the kernel. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include <unwind.h>

typedef long (*kernel_fn)(long, long, long, long, long, long, long, long, long, long);

static void *kernel_base;
static volatile long in_kernel, reached_caller;

__attribute__((noinline)) static void probe_call(kernel_fn f, const long *a) {
    f(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9]);
    __asm__ volatile("" ::: "memory"); /* the call is not a tail call: probe_call stays on the stack */
}

/* A return address into probe_call lies in its first bytes. */
#define CALLER_BYTES 256

struct walk {
    int in_kernel; /* a frame of the kernel's object has been walked */
    int found;     /* the frame after the kernel's is probe_call's */
};

static int in_kernel_object(uintptr_t ip) {
    Dl_info where;
    return dladdr((void *)ip, &where) && where.dli_fbase == kernel_base;
}

static _Unwind_Reason_Code step(struct _Unwind_Context *ctx, void *arg) {
    struct walk *w = arg;
    uintptr_t ip = _Unwind_GetIP(ctx), at = (uintptr_t)probe_call;
    if (in_kernel_object(ip)) {
        w->in_kernel = 1;
        return _URC_NO_REASON;
    }
    if (!w->in_kernel) return _URC_NO_REASON; /* the handler's frames, the signal trampoline */
    w->found = ip > at && ip < at + CALLER_BYTES;
    return _URC_END_OF_STACK;
}

static void on_tick(int sig, siginfo_t *si, void *uc) {
    (void)sig, (void)si;
    if (!in_kernel_object((uintptr_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP])) return;
    in_kernel++;
    struct walk w = {0, 0};
    _Unwind_Backtrace(step, &w);
    reached_caller += w.found;
}

/* Calls f(args) until `samples` ticks landed in the kernel's object or `seconds` of CPU time
 * passed; out[0] = ticks inside the kernel, out[1] = those whose unwinding reached the caller. */
void unwind_probe(kernel_fn f, const long *args, int samples, double seconds, long *out) {
    Dl_info where;
    dladdr((void *)f, &where);
    kernel_base = where.dli_fbase;
    in_kernel = reached_caller = 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_tick;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigaction(SIGPROF, &sa, NULL);
    struct itimerval every = {{0, 200}, {0, 200}}, off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &every, NULL);
    struct timespec start, now;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &start);
    do {
        probe_call(f, args);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    } while (in_kernel < samples &&
             (now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) * 1e-9 < seconds);
    setitimer(ITIMER_PROF, &off, NULL);
    signal(SIGPROF, SIG_DFL);
    out[0] = in_kernel;
    out[1] = reached_caller;
}
