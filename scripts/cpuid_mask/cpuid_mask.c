/* cpuid_mask: make a process see a CPU without some instruction sets, to run it down the code
 * paths an older CPU takes (ONNX Runtime's MLAS, oneDNN/OpenVINO and numpy choose their kernels
 * by the CPUID instruction).
 *
 *   cc -O2 -shared -fPIC -o cpuid_mask.so cpuid_mask.c -ldl
 *   CPUID_MASK=avx2 LD_PRELOAD=$PWD/cpuid_mask.so python ...
 *
 * How: Linux's CPUID faulting (arch_prctl ARCH_SET_CPUID 0; /proc/cpuinfo flag `cpuid_fault`)
 * makes every CPUID instruction of the process raise SIGSEGV; the handler here runs the real
 * CPUID, clears the bits of the masked features and steps over the instruction. The setting is
 * per thread and inherited by threads made later; execve resets it, and a child started with
 * LD_PRELOAD in its environment sets it again. sigaction/signal for SIGSEGV are interposed so
 * that a program installing its own SIGSEGV handler (Python's faulthandler, pytest) chains
 * behind this one instead of replacing it.
 *
 * Masks (CPUID_MASK): "avx2" leaves SSE4.2, AVX, AVX2, FMA, F16C, BMI1/2 and clears AVX-512
 * (every subset), AVX-VNNI, AVX512-BF16/FP16, AMX, GFNI, VAES, VPCLMULQDQ: the instruction sets
 * of an AMD EPYC of the Zen 2 generation. "avx512" keeps AVX-512 (F, CD, BW, DQ, VL) and
 * AVX512-VNNI and clears AMX, bfloat16 and FP16: a Xeon of the Cascade Lake generation. "none"
 * masks nothing (the handler still runs: a control for the handler's own cost).
 * `scripts/cpuid_mask/run` builds the library and runs a command under it.
 *
 * Where CPUID faulting is missing the library says so on stderr and the process runs unmasked; `CPUID_MASK_STRICT=1` makes that fatal (exit 3).
 * Only the ISA changes: the timing of the real CPU's cores stays what it is.
 */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

static struct sigaction chained;     /* what the program asked SIGSEGV to do */
static int active;                   /* our handler is installed */
static int mask_avx2;                /* CPUID_MASK=avx2 */
static int mask_avx512;              /* CPUID_MASK=avx512 */
static volatile unsigned long trapped; /* CPUID instructions answered here (CPUID_MASK_COUNT=1 prints it at exit) */

static long arch_prctl_(int code, unsigned long arg) { return syscall(SYS_arch_prctl, code, arg); }

static sigaction_fn real_sigaction(void) {
    static sigaction_fn fn;
    if (!fn) fn = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    return fn;
}

#define BIT(n) (1u << (n))

/* What both masks clear: AMX, bfloat16, FP16, AVX-VNNI and the AVX-512 extensions past Cascade Lake's. */
static void mask_past_avx512(unsigned leaf, unsigned sub, unsigned r[4]) {
    if (leaf == 7 && sub == 0) {
        /* EBX: IFMA 21, PF 26, ER 27 */
        r[1] &= ~(BIT(21) | BIT(26) | BIT(27));
        /* ECX: VBMI 1, VBMI2 6, GFNI 8, VAES 9, VPCLMULQDQ 10, BITALG 12, VPOPCNTDQ 14 */
        r[2] &= ~(BIT(1) | BIT(6) | BIT(8) | BIT(9) | BIT(10) | BIT(12) | BIT(14));
        /* EDX: 4VNNIW 2, 4FMAPS 3, VP2INTERSECT 8, AMX-BF16 22, AVX512-FP16 23, AMX-TILE 24, AMX-INT8 25 */
        r[3] &= ~(BIT(2) | BIT(3) | BIT(8) | BIT(22) | BIT(23) | BIT(24) | BIT(25));
    } else if (leaf == 7 && sub == 1) {
        /* EAX: AVX-VNNI 4, AVX512-BF16 5, AMX-FP16 21, AVX-IFMA 23; EDX: AVX-VNNI-INT8 4, AVX-NE-CONVERT 5,
         * AMX-COMPLEX 8, AVX-VNNI-INT16 10, AVX10 19 */
        r[0] &= ~(BIT(4) | BIT(5) | BIT(21) | BIT(23));
        r[3] &= ~(BIT(4) | BIT(5) | BIT(8) | BIT(10) | BIT(19));
    } else if (leaf == 0xd && sub == 0) {
        /* XSAVE state components: AMX XTILECFG 17, XTILEDATA 18 */
        r[0] &= ~(BIT(17) | BIT(18));
    } else if (leaf == 0x1d || leaf == 0x1e || leaf == 0x24) {
        r[0] = r[1] = r[2] = r[3] = 0;  /* AMX tile and AVX10 information */
    }
}

static void mask(unsigned leaf, unsigned sub, unsigned r[4]) {
    if (!mask_avx2 && !mask_avx512) return;
    mask_past_avx512(leaf, sub, r);
    if (!mask_avx2) return;
    /* avx2 clears AVX-512 itself too */
    if (leaf == 7 && sub == 0) {
        r[1] &= ~(BIT(16) | BIT(17) | BIT(28) | BIT(30) | BIT(31));  /* EBX: AVX512F 16, DQ 17, CD 28, BW 30, VL 31 */
        r[2] &= ~BIT(11);                                            /* ECX: AVX512-VNNI 11 */
    } else if (leaf == 0xd && sub == 0) {
        r[0] &= ~(BIT(5) | BIT(6) | BIT(7));  /* XSAVE state: opmask 5, ZMM_Hi256 6, Hi16_ZMM 7 */
    }
}

static void on_segv(int sig, siginfo_t *info, void *context) {
    ucontext_t *uc = (ucontext_t *)context;
    greg_t *g = uc->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)g[REG_RIP];
    if (info->si_code == SI_KERNEL && ip[0] == 0x0f && ip[1] == 0xa2) {
        unsigned leaf = (unsigned)g[REG_RAX], sub = (unsigned)g[REG_RCX], r[4];
        __atomic_add_fetch(&trapped, 1, __ATOMIC_RELAXED);
        arch_prctl_(ARCH_SET_CPUID, 1);
        __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
        arch_prctl_(ARCH_SET_CPUID, 0);
        mask(leaf, sub, r);
        g[REG_RAX] = r[0]; g[REG_RBX] = r[1]; g[REG_RCX] = r[2]; g[REG_RDX] = r[3];
        g[REG_RIP] += 2;
        return;
    }
    /* a real fault: the program's own handler, else the default action (the fault recurs) */
    if (chained.sa_flags & SA_SIGINFO) {
        if (chained.sa_sigaction) { chained.sa_sigaction(sig, info, context); return; }
    } else if (chained.sa_handler != SIG_DFL && chained.sa_handler != SIG_IGN && chained.sa_handler) {
        chained.sa_handler(sig);
        return;
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    real_sigaction()(SIGSEGV, &dfl, NULL);
}

int sigaction(int signum, const struct sigaction *act, struct sigaction *old) {
    if (signum != SIGSEGV || !active) return real_sigaction()(signum, act, old);
    if (old) *old = chained;
    if (act) chained = *act;
    return 0;
}

sighandler_t signal(int signum, sighandler_t handler) {
    if (signum != SIGSEGV || !active) {
        struct sigaction act, old;
        memset(&act, 0, sizeof act);
        act.sa_handler = handler;
        act.sa_flags = SA_RESTART;
        sigemptyset(&act.sa_mask);
        return real_sigaction()(signum, &act, &old) == 0 ? old.sa_handler : SIG_ERR;
    }
    sighandler_t before = chained.sa_handler;
    memset(&chained, 0, sizeof chained);
    chained.sa_handler = handler;
    return before;
}

/* Each CPUID answered costs a trap into the kernel and back (microseconds): a library that asks on
 * every call (oneDNN's matmuls under torch do) runs slower masked than it would on the real
 * CPU; the count at exit says whether a timing can be trusted. */
__attribute__((destructor)) static void stop(void) {
    const char *count = getenv("CPUID_MASK_COUNT");
    if (active && count && *count == '1')
        fprintf(stderr, "cpuid_mask: %lu CPUID instructions answered in process %d\n", trapped, (int)getpid());
}

__attribute__((constructor)) static void start(void) {
    const char *which = getenv("CPUID_MASK");
    const char *strict = getenv("CPUID_MASK_STRICT");
    if (!which || !*which) return;
    if (strcmp(which, "avx2") == 0) mask_avx2 = 1;
    else if (strcmp(which, "avx512") == 0) mask_avx512 = 1;
    else if (strcmp(which, "none") != 0) {
        fprintf(stderr, "cpuid_mask: unknown CPUID_MASK=%s (avx2, avx512 or none)\n", which);
        exit(3);
    }
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_sigaction = on_segv;
    act.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&act.sa_mask);
    real_sigaction()(SIGSEGV, &act, &chained);
    if (arch_prctl_(ARCH_SET_CPUID, 0) != 0) {
        real_sigaction()(SIGSEGV, &chained, NULL);
        fprintf(stderr, "cpuid_mask: this kernel/CPU has no CPUID faulting; running unmasked\n");
        if (strict && *strict == '1') exit(3);
        return;
    }
    active = 1;
}
