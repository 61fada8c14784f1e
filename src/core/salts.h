/*
 * Every constant that hashes start from, in one place. Each is part of a
 * promise, so changing one is a decision, not a tidy-up:
 *
 * - SL__SALT_FINGERPRINT starts every sl_dataset_fingerprint, and the
 *   fingerprint is written into the header of every cache file on disk: a
 *   new value makes every existing cache file a mismatch, rebuilt on its
 *   next use. tests/test_fingerprint.c pins the fingerprint of a fixed
 *   pipeline so that this (or a change in what an op mixes in) shows.
 * - The others key the random streams (shuffle orders, crops, flips): a
 *   new value changes every output for a given seed, so runs stop
 *   reproducing those of earlier releases. The same test pins a stream.
 */
#ifndef SL_CORE_SALTS_H
#define SL_CORE_SALTS_H

#define SL__SALT_FINGERPRINT 0x5c1ce5ull /* sl_dataset_fingerprint's start */
#define SL__SALT_SEED 0x5eedull          /* SL_OPT_SEED -> the tree's seed */
#define SL__SALT_OP_SEED 0x0bull         /* an op's own seed (shuffle's) */
#define SL__SALT_ROOT_KEY 0x726f6f74ull  /* the root node's key ("root") */
#define SL__SALT_CACHE_SEEN 0x66696c65ull /* cache: the slot of the file checked ("file") */
#define SL__SALT_INTERLEAVE 0x696e746cull /* interleave: its inputs' keys ("intl") */
#define SL__SALT_RESCAN 0x7e5ca9ull      /* a rescanning folder's fingerprint (its root) */

#endif
