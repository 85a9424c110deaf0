/* Garbling and evaluating a Bristol circuit with the half-gates kernels, in batches (aesgen.garbling.driver).
 *
 * Labels are 16 bytes per wire. Linear gates XOR labels (free-XOR): INV gates XOR the label of delta
 * (for the garbler; zero for the evaluator: it keeps its label), EQW gates that of zero. AND gates go
 * to the kernel in batches; it hashes the batch and writes the output labels. A kernel call covers
 * gates with consecutive ids (first_gate_id + i); the tables are stored by id.
 *
 *   static:  the circuit compiled in (program.py writes it after this file, with CIRCUIT defined):
 *            in level order (layers.py), a layer's AND gates consecutive in id and in label, cut
 *            into calls of the _gather kernel of `batch` gates (and_run), which reads the input
 *            labels by offset from the label array; batch 1 is the same code, a call per gate.
 *   dynamic: the gate arrays in circuit order with deferred execution: an AND gate's hashes join a
 *            queue (its output label is pending) and the walk goes on; the queue is flushed when full
 *            or when a gate reads a pending label (a result is needed), its gates issued in queue order
 *            as runs of consecutive ids. How much it batches depends on how the circuit is written:
 *            independent AND gates close together (aes128.py writes the 16 S-boxes gate by gate).
 *            Their inputs go to the _gather kernel too, as a table of offsets built per flush.
 *            driver.py lays its arrays out with INV reading the label after the last wire (delta)
 *            and EQW the one before it (zero).
 */
#include <emmintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* the _gather kernels: gate i's input labels at labels + in[2i], labels + in[2i + 1] */
typedef void (*garble_gather_fn)(const void *key, const uint8_t *delta, const uint8_t *labels, const uint32_t *in,
                                 uint64_t first_gate_id, uint8_t *tables, uint8_t *c0, size_t n);
typedef void (*eval_gather_fn)(const void *key, const uint8_t *labels, const uint32_t *in, uint64_t first_gate_id,
                               const uint8_t *tables, uint8_t *c, size_t n);

enum { OP_XOR = 0, OP_AND = 1, OP_INV = 2, OP_EQW = 3 };

typedef struct {
    int garbler;
    void *fn;
    const void *key;
    const uint8_t *delta;
    uint8_t *labels;
    uint8_t *tables;
    const uint8_t *op;
    const int32_t *in0, *in1, *out;
    const int64_t *and_id;
    size_t batch;
    uint32_t *offsets;  /* dynamic: a flush's input offsets */
    uint8_t *c;         /* dynamic: its outputs, where they are not consecutive labels */
    uint64_t calls;
} engine;

/* one kernel call: n gates with ids first.., their input labels at the offsets in, their outputs to c */
static void call(engine *e, const uint32_t *in, uint64_t first, uint8_t *c, size_t n) {
    if (e->garbler)
        ((garble_gather_fn)e->fn)(e->key, e->delta, e->labels, in, first, e->tables + 32 * first, c, n);
    else
        ((eval_gather_fn)e->fn)(e->key, e->labels, in, first, e->tables + 32 * first, c, n);
    e->calls++;
}

static inline void xor_labels(uint8_t *labels, int32_t out, int32_t x, int32_t y) {
    __m128i a = _mm_loadu_si128((const __m128i *)(labels + 16 * (size_t)x));
    __m128i b = _mm_loadu_si128((const __m128i *)(labels + 16 * (size_t)y));
    _mm_storeu_si128((__m128i *)(labels + 16 * (size_t)out), _mm_xor_si128(a, b));
}

static inline void linear_gate(engine *e, int32_t g) {
    xor_labels(e->labels, e->out[g], e->in0[g], e->in1[g]);
}

/* gates members[0..n) with ids first .. first+n-1: one kernel call. Their output wires are consecutive
 * when the wires are numbered in level order (driver.py does): the kernel writes the labels in place. */
static void issue(engine *e, const int32_t *members, size_t n) {
    for (size_t i = 0; i < n; i++) {
        e->offsets[2 * i] = 16 * (uint32_t)e->in0[members[i]];
        e->offsets[2 * i + 1] = 16 * (uint32_t)e->in1[members[i]];
    }
    int32_t o = e->out[members[0]];
    int direct = 1;
    for (size_t i = 1; i < n && direct; i++)
        direct = e->out[members[i]] == o + (int32_t)i;
    uint8_t *c = direct ? e->labels + 16 * (size_t)o : e->c;
    call(e, e->offsets, (uint64_t)e->and_id[members[0]], c, n);
    if (!direct)
        for (size_t i = 0; i < n; i++)
            memcpy(e->labels + 16 * (size_t)e->out[members[i]], e->c + 16 * i, 16);
}

static int setup(engine *e, size_t batch) {
    e->batch = batch;
    e->offsets = aligned_alloc(64, 64 + 8 * batch);
    e->c = aligned_alloc(64, 64 + 16 * batch);
    e->calls = 0;
    return e->offsets && e->c ? 0 : -1;
}

static void teardown(engine *e) {
    free(e->offsets);
    free(e->c);
}

/* ---------------------------------------------------------------- static */
/* program.py writes the circuit as C after this file (with CIRCUIT defined): a function per segment,
 * its XOR sums as loads and stores at constant label indices, then and_run on the segment's AND
 * gates, whose input labels the _gather kernels read by their byte offsets (a table per segment). */
#define LD(i) _mm_load_si128((const __m128i *)(L + 16 * (size_t)(i)))
#define ST(i, v) _mm_store_si128((__m128i *)(L + 16 * (size_t)(i)), (v))

/* AND gates from..n-1 of a run with ids first.., input offsets in (two per gate), their outputs the
 * labels out..: kernel calls of `batch`; returns n. */
static size_t and_run(engine *e, const uint32_t *in, uint64_t first, size_t from, size_t n, size_t out) {
    for (size_t done = from; done < n;) {
        size_t m = n - done < e->batch ? n - done : e->batch;
        call(e, in + 2 * done, first + done, e->labels + 16 * (out + done), m);
        done += m;
    }
    return n;
}

/* The run's first k gates have their inputs: the whole batches among those not issued yet go. */
#define READY(k) do { if ((k) - issued >= e->batch) \
                          issued = and_run(e, in, first, issued, (k) - ((k) - issued) % e->batch, out); } while (0)

/* ---------------------------------------------------------------- dynamic */
typedef struct {
    engine *e;
    uint8_t *pending;  /* per label: its AND gate waits in the queue */
    int32_t *queue;
    size_t queued;
    uint64_t flushes;
} dyn;

static void flush(dyn *d) {
    engine *e = d->e;
    int32_t *q = d->queue;
    size_t n = d->queued;
    if (!n)
        return;
    /* in queue (circuit) order: a run of consecutive ids is one kernel call. (Sorting the queue by id
     * would merge runs, but a queue that spans AND layers is far from sorted: it cost more than the
     * calls it saved.) */
    size_t start = 0;
    for (size_t i = 1; i <= n; i++)
        if (i == n || e->and_id[q[i]] != e->and_id[q[i - 1]] + 1) {
            issue(e, q + start, i - start);
            start = i;
        }
    for (size_t i = 0; i < n; i++)
        d->pending[e->out[q[i]]] = 0;
    d->queued = 0;
    d->flushes++;
}

static int run_dynamic(engine *e, size_t ngates, size_t nlabels, uint64_t *flushes) {
    dyn d = {.e = e};
    d.pending = calloc(nlabels, 1);
    d.queue = malloc(sizeof(int32_t) * e->batch);
    if (d.pending && d.queue) {
        for (size_t k = 0; k < ngates; k++) {
            int32_t g = (int32_t)k;
            if (d.pending[e->in0[g]] | d.pending[e->in1[g]])
                flush(&d);  /* the result is needed */
            if (e->op[g] != OP_AND) {
                linear_gate(e, g);
                continue;
            }
            d.pending[e->out[g]] = 1;
            d.queue[d.queued++] = g;
            if (d.queued == e->batch)
                flush(&d);
        }
        flush(&d);
        *flushes = d.flushes;
    }
    int ok = d.pending && d.queue;
    free(d.pending);
    free(d.queue);
    return ok ? 0 : -1;
}

/* ---------------------------------------------------------------- entry */
/* the labels zero and delta (for the evaluator: zero) at zero, zero + 1. */
static void constants(engine *e, uint8_t *labels, size_t zero) {
    memset(labels + 16 * zero, 0, 16);
    if (e->garbler)
        memcpy(labels + 16 * (zero + 1), e->delta, 16);
    else
        memset(labels + 16 * (zero + 1), 0, 16);
}

#ifdef CIRCUIT
static void circuit(engine *e); /* program.py's */

/* static: the circuit compiled in; fn a _gather kernel. Returns the kernel calls, or -1 for batch 0. */
int64_t gc_static(int garbler, void *fn, const void *key, const uint8_t *delta, uint8_t *labels, uint8_t *tables,
                  size_t batch) {
    engine e = {.garbler = garbler, .fn = fn, .key = key, .delta = delta, .labels = labels, .tables = tables,
                .batch = batch};
    if (batch == 0)
        return -1;
    constants(&e, labels, ZERO_LABEL);
    circuit(&e);
    return (int64_t)e.calls;
}
#endif

/* dynamic: the gate arrays in circuit order. Returns the kernel calls, or -1 if memory ran out; *flushes
 * gets the queue's flushes. */
int64_t gc_dynamic(int garbler, void *fn, const void *key, const uint8_t *delta, uint8_t *labels, uint8_t *tables,
                   const uint8_t *op, const int32_t *in0, const int32_t *in1, const int32_t *out,
                   const int64_t *and_id, size_t ngates, size_t nlabels, size_t batch, uint64_t *flushes) {
    engine e = {.garbler = garbler, .fn = fn, .key = key, .delta = delta, .labels = labels, .tables = tables,
                .op = op, .in0 = in0, .in1 = in1, .out = out, .and_id = and_id};
    *flushes = 0;
    constants(&e, labels, nlabels - 2);
    if (batch == 0 || setup(&e, batch) != 0) {
        teardown(&e);
        return -1;
    }
    int rc = run_dynamic(&e, ngates, nlabels, flushes);
    teardown(&e);
    return rc ? -1 : (int64_t)e.calls;
}
