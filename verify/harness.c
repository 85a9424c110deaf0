/* aesgen verifier runtime harness: ABI trampoline, planted-fault callees,
 * CAVP Monte-Carlo loops and a SIGSEGV reporter.  Built once by
 * verify/build.py with `cc -O2 -shared -fPIC` and loaded through ctypes.
 *
 * Nothing here depends on a kernel's prefix: kernel functions arrive as
 * plain function pointers. */
#include <cpuid.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------
 * ABI trampoline
 *
 * The offsets below are shared with the assembly and with the ctypes
 * Structure in verify/abi.py; the _Static_asserts keep all three in step.
 */
typedef struct abi_ctx {
    uint64_t fn;            /*   0 */
    uint64_t args[6];       /*   8 rdi rsi rdx rcx r8 r9 */
    uint64_t seeded[6];     /*  56 rbx rbp r12 r13 r14 r15 before the call */
    uint64_t after[6];      /* 104 the same registers after the call */
    uint64_t rsp_before;    /* 152 */
    uint64_t rsp_after;     /* 160 */
    uint64_t rflags_after;  /* 168 */
    uint64_t ret;           /* 176 rax */
    uint64_t xinuse_before; /* 184 */
    uint64_t xinuse_after;  /* 192 */
    uint32_t mxcsr_before;  /* 200 */
    uint32_t mxcsr_after;   /* 204 */
    uint16_t fcw_before;    /* 208 */
    uint16_t fcw_after;     /* 210 */
    uint32_t flags;         /* 212 bit0: read XINUSE, bit1: vzeroupper around the call */
    uint64_t nstack;        /* 216 how many of the 8 stack slots are arguments 7, 8, ... */
    uint64_t stack[8];      /* 224 the stack slots at the call: arguments, then sentinels */
    uint64_t stack_after[8];/* 288 the same slots after the call */
    /* Microsoft x64 (flags bit 2): arguments 1-4 in rcx rdx r8 r9, 5 and 6 on the
     * stack above the 32-byte shadow space, then stack[]; rdi, rsi, xmm6-15 callee-saved. */
    uint64_t w64_seeded[2]; /* 352 rdi rsi before the call */
    uint64_t w64_after[2];  /* 368 the same registers after the call */
    uint64_t args56_after[2];/* 384 arguments 5 and 6 on the stack after the call */
    uint8_t xmm_seeded[160];/* 400 xmm6..xmm15 before the call */
    uint8_t xmm_after[160]; /* 560 the same registers after the call */
} abi_ctx;

_Static_assert(__builtin_offsetof(abi_ctx, seeded) == 56, "layout");
_Static_assert(__builtin_offsetof(abi_ctx, after) == 104, "layout");
_Static_assert(__builtin_offsetof(abi_ctx, rsp_before) == 152, "layout");
_Static_assert(__builtin_offsetof(abi_ctx, xinuse_before) == 184, "layout");
_Static_assert(__builtin_offsetof(abi_ctx, mxcsr_before) == 200, "layout");
_Static_assert(__builtin_offsetof(abi_ctx, fcw_before) == 208, "layout");
_Static_assert(__builtin_offsetof(abi_ctx, flags) == 212, "layout");
_Static_assert(__builtin_offsetof(abi_ctx, nstack) == 216, "layout");
_Static_assert(__builtin_offsetof(abi_ctx, stack) == 224, "layout");
_Static_assert(__builtin_offsetof(abi_ctx, stack_after) == 288, "layout");
_Static_assert(__builtin_offsetof(abi_ctx, w64_seeded) == 352, "layout");
_Static_assert(__builtin_offsetof(abi_ctx, xmm_seeded) == 400, "layout");
_Static_assert(__builtin_offsetof(abi_ctx, xmm_after) == 560, "layout");
_Static_assert(sizeof(abi_ctx) == 720, "layout");

#define ABI_STACK_SLOTS 8

enum {
    ABI_FLAG_XINUSE = 1,
    ABI_FLAG_VZEROUPPER = 2,
    ABI_FLAG_WIN64 = 4,
};

/* Failure bits returned by abi_call (names live in verify/abi.py). */
enum {
    ABI_BAD_RBX = 1 << 0, ABI_BAD_RBP = 1 << 1, ABI_BAD_R12 = 1 << 2,
    ABI_BAD_R13 = 1 << 3, ABI_BAD_R14 = 1 << 4, ABI_BAD_R15 = 1 << 5,
    ABI_BAD_RSP = 1 << 6, ABI_BAD_DF = 1 << 7, ABI_BAD_MXCSR = 1 << 8,
    ABI_BAD_FCW = 1 << 9, ABI_BAD_YMM = 1 << 10, ABI_BAD_ZMM = 1 << 11,
    ABI_BAD_STACKARG = 1 << 12,   /* a stack argument (7th, 8th, ...) changed */
    ABI_BAD_FRAME = 1 << 13,      /* a caller stack slot above the arguments changed */
    ABI_BAD_RDI = 1 << 14, ABI_BAD_RSI = 1 << 15,   /* win64 */
    ABI_BAD_XMM6 = 1 << 16,       /* win64: bit 16 + i for xmm(6 + i), i = 0..9 */
};

void abi_trampoline(abi_ctx *c);

/* The trampoline keeps the context pointer and its own stack pointer in
 * static slots, so a callee that wrecks every register (rsp included, as
 * long as it still returns) cannot make us lose track of them.
 *
 * Below its saved registers it reserves a 112-byte area B (rsp 16-byte
 * aligned): B+0..32 the win64 shadow space, B+32 and B+40 arguments 5 and 6
 * (win64), B+48..112 the 8 slots ctx->stack[]: the first ctx->nstack are
 * arguments 7, 8, ... and the rest sentinels standing for the caller's frame.
 * SysV calls with rsp = B+48 (stack[] at the return address + 8), win64 with
 * rsp = B.  After the call the slots are copied to ctx->stack_after[].
 * With ABI_FLAG_WIN64 the callee also gets seeded rdi, rsi and xmm6-15. */
__asm__(
    "    .text\n"
    "    .local abi_saved_ctx, abi_saved_rsp, abi_after_rdi, abi_after_rsi\n"
    "    .comm abi_saved_ctx, 8, 8\n"
    "    .comm abi_saved_rsp, 8, 8\n"
    "    .comm abi_after_rdi, 8, 8\n"
    "    .comm abi_after_rsi, 8, 8\n"
    "    .globl abi_trampoline\n"
    "    .type abi_trampoline, @function\n"
    "abi_trampoline:\n"
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    pushq %rdi\n"
    "    pushq %rsi\n"
    "    subq $120, %rsp\n"                 /* area B; rsp is now 16-byte aligned */
    "    movq 40(%rdi), %rax\n    movq %rax, 32(%rsp)\n"
    "    movq 48(%rdi), %rax\n    movq %rax, 40(%rsp)\n"
    "    movq 224(%rdi), %rax\n    movq %rax, 48(%rsp)\n"
    "    movq 232(%rdi), %rax\n    movq %rax, 56(%rsp)\n"
    "    movq 240(%rdi), %rax\n    movq %rax, 64(%rsp)\n"
    "    movq 248(%rdi), %rax\n    movq %rax, 72(%rsp)\n"
    "    movq 256(%rdi), %rax\n    movq %rax, 80(%rsp)\n"
    "    movq 264(%rdi), %rax\n    movq %rax, 88(%rsp)\n"
    "    movq 272(%rdi), %rax\n    movq %rax, 96(%rsp)\n"
    "    movq 280(%rdi), %rax\n    movq %rax, 104(%rsp)\n"
    "    movq %rdi, abi_saved_ctx(%rip)\n"
    "    movq %rsp, abi_saved_rsp(%rip)\n"
    "    testl $4, 212(%rdi)\n"
    "    jnz 5f\n"
    "    addq $48, %rsp\n"                  /* SysV: stack[] right above the return address */
    "5:  movq %rsp, 152(%rdi)\n"
    "    stmxcsr 200(%rdi)\n"
    "    fnstcw 208(%rdi)\n"
    "    testl $2, 212(%rdi)\n"
    "    jz 1f\n"
    "    vzeroupper\n"                     /* start from a clean upper state */
    "1:  testl $1, 212(%rdi)\n"
    "    jz 2f\n"
    "    movl $1, %ecx\n"
    "    xgetbv\n"
    "    movl %eax, 184(%rdi)\n"
    "    movl %edx, 188(%rdi)\n"
    "2:  movq 56(%rdi), %rbx\n"
    "    movq 64(%rdi), %rbp\n"
    "    movq 72(%rdi), %r12\n"
    "    movq 80(%rdi), %r13\n"
    "    movq 88(%rdi), %r14\n"
    "    movq 96(%rdi), %r15\n"
    "    movq 0(%rdi), %r11\n"
    "    movq %r15, %rax\n"                 /* garbage in rax and r10 too */
    "    movq %r14, %r10\n"
    "    testl $4, 212(%rdi)\n"
    "    jz 6f\n"
    "    movdqu 400(%rdi), %xmm6\n    movdqu 416(%rdi), %xmm7\n"
    "    movdqu 432(%rdi), %xmm8\n    movdqu 448(%rdi), %xmm9\n"
    "    movdqu 464(%rdi), %xmm10\n    movdqu 480(%rdi), %xmm11\n"
    "    movdqu 496(%rdi), %xmm12\n    movdqu 512(%rdi), %xmm13\n"
    "    movdqu 528(%rdi), %xmm14\n    movdqu 544(%rdi), %xmm15\n"
    "    movq 32(%rdi), %r9\n"
    "    movq 24(%rdi), %r8\n"
    "    movq 16(%rdi), %rdx\n"
    "    movq 8(%rdi), %rcx\n"
    "    movq 360(%rdi), %rsi\n"
    "    movq 352(%rdi), %rdi\n"
    "    jmp 7f\n"
    "6:  movq 48(%rdi), %r9\n"
    "    movq 40(%rdi), %r8\n"
    "    movq 32(%rdi), %rcx\n"
    "    movq 24(%rdi), %rdx\n"
    "    movq 16(%rdi), %rsi\n"
    "    movq 8(%rdi), %rdi\n"
    "7:  call *%r11\n"
    "    movq %rsp, %r11\n"
    "    movq abi_saved_rsp(%rip), %rsp\n"
    "    pushfq\n"
    "    popq %r10\n"
    "    cld\n"
    "    movq %rdi, abi_after_rdi(%rip)\n"
    "    movq %rsi, abi_after_rsi(%rip)\n"
    "    movq abi_saved_ctx(%rip), %rdi\n"
    "    movdqu %xmm6, 560(%rdi)\n    movdqu %xmm7, 576(%rdi)\n"
    "    movdqu %xmm8, 592(%rdi)\n    movdqu %xmm9, 608(%rdi)\n"
    "    movdqu %xmm10, 624(%rdi)\n    movdqu %xmm11, 640(%rdi)\n"
    "    movdqu %xmm12, 656(%rdi)\n    movdqu %xmm13, 672(%rdi)\n"
    "    movdqu %xmm14, 688(%rdi)\n    movdqu %xmm15, 704(%rdi)\n"
    "    movq %rax, 176(%rdi)\n"
    "    movq %r11, 160(%rdi)\n"
    "    movq %r10, 168(%rdi)\n"
    "    movq %rbx, 104(%rdi)\n"
    "    movq %rbp, 112(%rdi)\n"
    "    movq %r12, 120(%rdi)\n"
    "    movq %r13, 128(%rdi)\n"
    "    movq %r14, 136(%rdi)\n"
    "    movq %r15, 144(%rdi)\n"
    "    movq abi_after_rdi(%rip), %rax\n    movq %rax, 368(%rdi)\n"
    "    movq abi_after_rsi(%rip), %rax\n    movq %rax, 376(%rdi)\n"
    "    movq 32(%rsp), %rax\n    movq %rax, 384(%rdi)\n"
    "    movq 40(%rsp), %rax\n    movq %rax, 392(%rdi)\n"
    "    movq 48(%rsp), %rax\n    movq %rax, 288(%rdi)\n"
    "    movq 56(%rsp), %rax\n    movq %rax, 296(%rdi)\n"
    "    movq 64(%rsp), %rax\n    movq %rax, 304(%rdi)\n"
    "    movq 72(%rsp), %rax\n    movq %rax, 312(%rdi)\n"
    "    movq 80(%rsp), %rax\n    movq %rax, 320(%rdi)\n"
    "    movq 88(%rsp), %rax\n    movq %rax, 328(%rdi)\n"
    "    movq 96(%rsp), %rax\n    movq %rax, 336(%rdi)\n"
    "    movq 104(%rsp), %rax\n    movq %rax, 344(%rdi)\n"
    "    stmxcsr 204(%rdi)\n"
    "    fnstcw 210(%rdi)\n"
    "    ldmxcsr 200(%rdi)\n"
    "    fldcw 208(%rdi)\n"
    "    testl $1, 212(%rdi)\n"
    "    jz 3f\n"
    "    movl $1, %ecx\n"
    "    xgetbv\n"
    "    movl %eax, 192(%rdi)\n"
    "    movl %edx, 196(%rdi)\n"
    "3:  testl $2, 212(%rdi)\n"
    "    jz 4f\n"
    "    vzeroupper\n"                     /* do not leak a dirty state into C */
    "4:  addq $120, %rsp\n"
    "    popq %rsi\n"
    "    popq %rdi\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    ret\n"
    "    .size abi_trampoline, .-abi_trampoline\n");

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t xgetbv0(void)
{
    uint32_t a, d;
    __asm__ volatile("xgetbv" : "=a"(a), "=d"(d) : "c"(0));
    return ((uint64_t)d << 32) | a;
}

/* 1 if XGETBV(ECX=1) reports XINUSE (CPUID.(EAX=0DH,ECX=1):EAX[2]). */
int abi_xinuse_supported(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)))  /* OSXSAVE */
        return 0;
    if (__get_cpuid_max(0, 0) < 0xd)
        return 0;
    __cpuid_count(0xd, 1, a, b, c, d);
    return (a >> 2) & 1;
}

/* 1 if the OS has enabled AVX state (so vzeroupper is legal here). */
int abi_avx_enabled(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)) || !(c & (1u << 28)))
        return 0;
    return (xgetbv0() & 6) == 6;
}

/* Call ctx->fn(ctx->args..., ctx->stack[0..nstack-1]) with callee-saved
 * registers seeded from `seed` and garbage in the upper halves of the args
 * whose bit is set in mask32 (bit 6 + k: stack argument k).  Stack slots past
 * the arguments get random sentinels.  Returns a mask of ABI_BAD_* bits; ctx
 * holds the raw observations. */
static unsigned abi_call_as(abi_ctx *ctx, uint64_t seed, unsigned mask32, int win64)
{
    uint64_t s = seed;
    unsigned bad = 0;
    if (ctx->nstack > ABI_STACK_SLOTS)
        ctx->nstack = ABI_STACK_SLOTS;
    for (int i = 0; i < 6; i++)
        ctx->seeded[i] = splitmix64(&s);
    for (int i = 0; i < 6; i++)
        if (mask32 & (1u << i)) {
            uint64_t g = splitmix64(&s) | 0x8000000100000000ULL;  /* never zero */
            ctx->args[i] = (ctx->args[i] & 0xffffffffULL) | (g & 0xffffffff00000000ULL);
        }
    for (unsigned i = 0; i < ABI_STACK_SLOTS; i++) {
        if (i >= ctx->nstack)
            ctx->stack[i] = splitmix64(&s);
        else if (mask32 & (1u << (6 + i))) {
            uint64_t g = splitmix64(&s) | 0x8000000100000000ULL;
            ctx->stack[i] = (ctx->stack[i] & 0xffffffffULL) | (g & 0xffffffff00000000ULL);
        }
        ctx->stack_after[i] = 0;
    }
    ctx->flags = win64 ? ABI_FLAG_WIN64 : 0;
    for (int i = 0; i < 2; i++)
        ctx->w64_seeded[i] = splitmix64(&s);
    for (int i = 0; i < 160; i += 8) {
        uint64_t r = splitmix64(&s);
        memcpy(ctx->xmm_seeded + i, &r, 8);
    }
    if (abi_avx_enabled())
        ctx->flags |= ABI_FLAG_VZEROUPPER;
    if (abi_xinuse_supported())
        ctx->flags |= ABI_FLAG_XINUSE;
    ctx->xinuse_before = ctx->xinuse_after = 0;
    abi_trampoline(ctx);
    for (int i = 0; i < 6; i++)
        if (ctx->seeded[i] != ctx->after[i])
            bad |= 1u << i;
    if (ctx->rsp_after != ctx->rsp_before)
        bad |= ABI_BAD_RSP;
    if (ctx->rflags_after & (1u << 10))
        bad |= ABI_BAD_DF;
    if (ctx->mxcsr_after != ctx->mxcsr_before)
        bad |= ABI_BAD_MXCSR;
    if (ctx->fcw_after != ctx->fcw_before)
        bad |= ABI_BAD_FCW;
    for (unsigned i = 0; i < ABI_STACK_SLOTS; i++)
        if (ctx->stack_after[i] != ctx->stack[i])
            bad |= i < ctx->nstack ? ABI_BAD_STACKARG : ABI_BAD_FRAME;
    if (win64) {
        for (int i = 0; i < 2; i++)
            if (ctx->w64_seeded[i] != ctx->w64_after[i])
                bad |= ABI_BAD_RDI << i;
        for (int i = 0; i < 10; i++)
            if (memcmp(ctx->xmm_seeded + 16 * i, ctx->xmm_after + 16 * i, 16))
                bad |= ABI_BAD_XMM6 << i;
        for (int i = 0; i < 2; i++)
            if (ctx->args56_after[i] != ctx->args[4 + i])
                bad |= ABI_BAD_STACKARG;
    }
    if (ctx->flags & ABI_FLAG_XINUSE) {
        uint64_t newly = ctx->xinuse_after & ~ctx->xinuse_before;
        if (newly & (1u << 2))
            bad |= ABI_BAD_YMM;
        if (newly & (1u << 6))
            bad |= ABI_BAD_ZMM;
    }
    return bad;
}

/* Call as SysV (abi_call) or through the Microsoft x64 convention (abi_call_win64,
 * which also seeds and checks rdi, rsi and xmm6-15). */
unsigned abi_call(abi_ctx *ctx, uint64_t seed, unsigned mask32)
{
    return abi_call_as(ctx, seed, mask32, 0);
}

unsigned abi_call_win64(abi_ctx *ctx, uint64_t seed, unsigned mask32)
{
    return abi_call_as(ctx, seed, mask32, 1);
}

/* ------------------------------------------------------------------------
 * Planted faults: each callee breaks exactly one rule, so the verifier can
 * prove the trampoline notices.  abi_fault_clean breaks none. */
__asm__(
    "    .text\n"
    "    .globl abi_fault_clean, abi_fault_rbx, abi_fault_r15, abi_fault_df\n"
    "    .globl abi_fault_mxcsr, abi_fault_fcw, abi_fault_ymm, abi_fault_zmm\n"
    "    .globl abi_fault_upper32, abi_stack_echo, abi_fault_stackarg, abi_fault_frame\n"
    "abi_fault_clean:\n"
    "    pushq %rbx\n"
    "    movq $0x5a5a5a5a, %rbx\n"        /* uses rbx, but restores it */
    "    popq %rbx\n"
    "    movl %esi, %eax\n"
    "    ret\n"
    "abi_fault_rbx:\n"
    "    xorl %ebx, %ebx\n"
    "    ret\n"
    "abi_fault_r15:\n"
    "    notq %r15\n"
    "    ret\n"
    "abi_fault_df:\n"
    "    std\n"
    "    ret\n"
    "abi_fault_mxcsr:\n"
    "    subq $8, %rsp\n"
    "    stmxcsr (%rsp)\n"
    "    xorl $0x6000, (%rsp)\n"           /* flip the rounding control */
    "    ldmxcsr (%rsp)\n"
    "    addq $8, %rsp\n"
    "    ret\n"
    "abi_fault_fcw:\n"
    "    subq $8, %rsp\n"
    "    fnstcw (%rsp)\n"
    "    xorw $0x0c00, (%rsp)\n"
    "    fldcw (%rsp)\n"
    "    addq $8, %rsp\n"
    "    ret\n"
    "abi_fault_ymm:\n"
    "    vpcmpeqd %ymm0, %ymm0, %ymm0\n"   /* all-ones upper half, no vzeroupper */
    "    ret\n"
    "abi_fault_zmm:\n"
    "    vpternlogd $0xff, %zmm1, %zmm1, %zmm1\n"
    "    ret\n"
    "abi_fault_upper32:\n"                /* treats `unsigned` rsi as 64-bit */
    "    xorl %eax, %eax\n"
    "    cmpq $128, %rsi\n"
    "    sete %al\n"
    "    ret\n"
    "abi_stack_echo:\n"                   /* clean: returns arg7 ^ arg8 ^ arg9 ^ arg10 */
    "    movq 8(%rsp), %rax\n"
    "    xorq 16(%rsp), %rax\n"
    "    xorq 24(%rsp), %rax\n"
    "    xorq 32(%rsp), %rax\n"
    "    ret\n"
    "abi_fault_stackarg:\n"               /* overwrites its 7th argument */
    "    notq 8(%rsp)\n"
    "    ret\n"
    "abi_fault_frame:\n"                  /* writes the slot above its 4 stack arguments */
    "    notq 40(%rsp)\n"
    "    ret\n"
    /* Microsoft x64 callees (called with abi_call_win64): arguments in rcx, rdx, ... */
    "    .globl abi_w64_clean, abi_w64_fault_xmm6, abi_w64_fault_xmm15, abi_w64_fault_rsi\n"
    "    .globl abi_w64_fault_rdi, abi_w64_stack_echo, abi_w64_fault_arg5\n"
    "abi_w64_clean:\n"                    /* uses rsi and xmm6, restores both; returns edx */
    "    pushq %rsi\n"
    "    subq $16, %rsp\n"
    "    movdqu %xmm6, (%rsp)\n"
    "    pxor %xmm6, %xmm6\n"
    "    movq $0x5a5a5a5a, %rsi\n"
    "    movdqu (%rsp), %xmm6\n"
    "    addq $16, %rsp\n"
    "    popq %rsi\n"
    "    movl %edx, %eax\n"
    "    ret\n"
    "abi_w64_fault_xmm6:\n"               /* a SysV habit: xmm6 treated as scratch */
    "    pxor %xmm6, %xmm6\n"
    "    movl %edx, %eax\n"
    "    ret\n"
    "abi_w64_fault_xmm15:\n"
    "    pcmpeqd %xmm15, %xmm15\n"
    "    movl %edx, %eax\n"
    "    ret\n"
    "abi_w64_fault_rsi:\n"                /* a SysV habit: rsi treated as scratch */
    "    xorl %esi, %esi\n"
    "    movl %edx, %eax\n"
    "    ret\n"
    "abi_w64_fault_rdi:\n"
    "    notq %rdi\n"
    "    movl %edx, %eax\n"
    "    ret\n"
    "abi_w64_stack_echo:\n"               /* clean: returns arg5 ^ arg6 ^ arg7 ^ arg8 */
    "    movq 40(%rsp), %rax\n"
    "    xorq 48(%rsp), %rax\n"
    "    xorq 56(%rsp), %rax\n"
    "    xorq 64(%rsp), %rax\n"
    "    ret\n"
    "abi_w64_fault_arg5:\n"               /* overwrites its 5th argument */
    "    notq 40(%rsp)\n"
    "    ret\n");

/* Call fn as a Microsoft x64 function with 14 integer arguments (extra ones are
 * ignored by the callee): how the verifier's direct calls reach win64 kernels. */
typedef uint64_t (__attribute__((ms_abi)) *ms_abi_fn)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                                                       uint64_t, uint64_t, uint64_t, uint64_t, uint64_t,
                                                       uint64_t, uint64_t, uint64_t, uint64_t);

uint64_t call_ms_abi(void *fn, const uint64_t *a)
{
    ms_abi_fn f = (ms_abi_fn)fn;
    return f(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13]);
}

/* ------------------------------------------------------------------------
 * CAVP Monte-Carlo test for CBC (AESAVS section 6.4), encrypt or decrypt.
 * The inner loop relies on the kernel's own IV chaining: one block per call
 * with iv updated in place is exactly CBC with the chained IV.  Encrypt and
 * decrypt share the shape: X[j] = F(Y[j]); Y[j+1] = (j == 0) ? IV : X[j-1].
 *
 * rec receives 100 records of 80 bytes: key[32] iv[16] in[16] out[16].
 * Returns 0, -1 if set_key failed, -2 on allocation failure. */
typedef int (*set_key_fn)(const uint8_t *, unsigned, void *);
typedef void (*cbc_fn)(const void *, const uint8_t *, uint8_t *, size_t, uint8_t *);
typedef int (__attribute__((ms_abi)) *set_key_ms_fn)(const uint8_t *, unsigned, void *);
typedef void (__attribute__((ms_abi)) *cbc_ms_fn)(const void *, const uint8_t *, uint8_t *, size_t, uint8_t *);

/* win64 != 0: the kernel functions follow the Microsoft x64 convention. */
int mct_cbc(void *set_key, void *cbc, size_t key_bytes, unsigned bits,
            const uint8_t *key0, const uint8_t *iv0, const uint8_t *in0, uint8_t *rec, int win64)
{
    set_key_fn sk = (set_key_fn)set_key;
    cbc_fn f = (cbc_fn)cbc;
    set_key_ms_fn sk_ms = (set_key_ms_fn)set_key;
    cbc_ms_fn f_ms = (cbc_ms_fn)cbc;
    size_t kb = bits / 8;
    uint8_t key[32], iv[16], in[16], chain[16], x[16], prev[16], prev2[16], next[16];
    void *ks = aligned_alloc(64, (key_bytes + 63) / 64 * 64);
    if (!ks)
        return -2;
    memcpy(key, key0, kb);
    memcpy(iv, iv0, 16);
    memcpy(in, in0, 16);
    for (int i = 0; i < 100; i++) {
        uint8_t *r = rec + 80 * i;
        memset(r, 0, 32);
        memcpy(r, key, kb);
        memcpy(r + 32, iv, 16);
        memcpy(r + 48, in, 16);
        if ((win64 ? sk_ms(key, bits, ks) : sk(key, bits, ks)) != 0) {
            free(ks);
            return -1;
        }
        memcpy(chain, iv, 16);
        for (int j = 0; j < 1000; j++) {
            if (win64)
                f_ms(ks, in, x, 1, chain);
            else
                f(ks, in, x, 1, chain);
            memcpy(next, j == 0 ? iv : prev, 16);
            memcpy(prev2, prev, 16);
            memcpy(prev, x, 16);
            memcpy(in, next, 16);
        }
        /* prev = X[999], prev2 = X[998] */
        memcpy(r + 64, prev, 16);
        if (bits == 128) {
            for (int k = 0; k < 16; k++) key[k] ^= prev[k];
        } else if (bits == 192) {
            for (int k = 0; k < 8; k++) key[k] ^= prev2[8 + k];
            for (int k = 0; k < 16; k++) key[8 + k] ^= prev[k];
        } else {
            for (int k = 0; k < 16; k++) key[k] ^= prev2[k];
            for (int k = 0; k < 16; k++) key[16 + k] ^= prev[k];
        }
        memcpy(iv, prev, 16);
        memcpy(in, prev2, 16);
    }
    free(ks);
    return 0;
}

/* ------------------------------------------------------------------------
 * Fault reporter for the forked guard-page child: record the signal and
 * faulting address in shared memory, then die of the same signal so the
 * parent's waitpid still sees it. */
static volatile uint64_t *fault_slot;

static void fault_handler(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (fault_slot) {
        fault_slot[1] = (uint64_t)(uintptr_t)si->si_addr;
        fault_slot[0] = (uint64_t)sig;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

int fault_install(uint64_t *slot)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fault_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    fault_slot = slot;
    if (sigaction(SIGSEGV, &sa, 0) || sigaction(SIGBUS, &sa, 0))
        return -1;
    return 0;
}
