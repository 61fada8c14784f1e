/*
 * What an iterator's autotune controller learned, kept on the dataset it
 * iterated for the dataset's next iterator: the value of every autotuned
 * knob and the controller's estimates per node, keyed by the node's
 * statistics key (the same from one iterator of a dataset to the next).
 * So a pipeline iterated once per epoch (the PyTorch idiom) starts each
 * epoch where the last one ended instead of from parallelism 1.
 *
 * It is used only under the conditions it was learned in (the pool's
 * threads, the CPU budget); the controller goes on tuning from there as
 * always (a RAM budget that is tighter now cuts a buffer at its first
 * tick).
 */
#ifndef SL_GRAPH_LEARNED_H
#define SL_GRAPH_LEARNED_H

#include <stdbool.h>
#include <stdint.h>

#define SL__LEARNED_MAX 64

typedef struct sl__learned_knob {
    uint64_t key; /* the node's statistics key */
    int kind;     /* sl__knob_kind */
    int64_t value;
} sl__learned_knob;

typedef struct sl__learned_node {
    uint64_t key;
    double busy_avg, cost_ns, el_bytes; /* the controller's estimates (controller.h) */
} sl__learned_node;

typedef struct sl__learned {
    int threads;     /* the pool's */
    int cpu_budget;  /* resolved */
    int nknobs, nnodes;
    sl__learned_knob knobs[SL__LEARNED_MAX];
    sl__learned_node nodes[SL__LEARNED_MAX];
} sl__learned;

typedef struct sl_dataset sl_dataset;

/* Keeps l (taken; NULL ok) as what ds's next iterator starts from,
 * replacing what was kept. Any thread. */
void sl__dataset_learned_keep(sl_dataset *ds, sl__learned *l);
/* A copy of what ds keeps if it was learned under these conditions, for
 * the caller to free with sl__learned_free; NULL otherwise. */
sl__learned *sl__dataset_learned_get(const sl_dataset *ds, int threads, int cpu_budget);
void sl__learned_free(sl__learned *l);
/* The kept value of the knob (key, kind); false if there is none. */
bool sl__learned_knob_value(const sl__learned *l, uint64_t key, int kind, int64_t *value);
/* The kept estimates of node key, or NULL. */
const sl__learned_node *sl__learned_node_of(const sl__learned *l, uint64_t key);

#endif
