/*
 * The service's transport (net.c): frames (wire.h) between processes over
 * UCX's ucp active messages: shared memory between processes of one host,
 * TCP on Ethernet, RDMA on InfiniBand and RoCE, as UCX chooses (its own
 * UCX_TLS and UCX_NET_DEVICES variables restrict the choice). Connections
 * are made by address: a listener on one side (the trainer), ucp's
 * client-server connect on the other.
 *
 * Each sl__net has one progress thread that owns the UCX worker: every
 * hook runs there, and every other call may come from any thread (it is
 * queued and the thread woken). A frame that does not parse, or a peer
 * that goes away (UCX's error handling reports a dropped connection),
 * closes that peer's link with a message naming it; a stopped process
 * keeps its connection, so liveness is the caller's heartbeat (PING on
 * on_tick). In a build without UCX every call fails with SL_EUNSUPPORTED
 * naming SLUICE_WITH_UCX.
 */
#ifndef SL_SERVICE_NET_H
#define SL_SERVICE_NET_H

#include <stdbool.h>
#include <stdint.h>
#include "../core/alloc.h"
#include "../core/bytes.h"
#include "wire.h"

typedef struct sl__net sl__net;
typedef struct sl__peer sl__peer;

typedef struct sl__net_hooks {
    void *user;
    /* A frame from p, its header checked and its payload (n bytes at
     * payload, CRC checked, on a 64-byte boundary) inside buf, which the
     * hook now owns (sl__buf_release). */
    void (*on_frame)(void *user, sl__peer *p, const sl__wire_hdr *h, sl__buf *buf,
                     const unsigned char *payload, size_t n);
    /* p connected to this side's listener (NULL: accepted silently). */
    void (*on_accept)(void *user, sl__peer *p);
    /* p's link ended: code 0 when closed by this side, else negative with
     * why naming the peer. No hook sees p after this one; p stays valid
     * (its name readable) until sl__net_free. */
    void (*on_close)(void *user, sl__peer *p, int code, const char *why);
    /* Every tick_ms (heartbeats, deadlines). NULL: none. */
    void (*on_tick)(void *user);
    int tick_ms;
    /* Largest payload taken from a new peer; a longer frame closes its
     * link. Small until the peer has proved the secret, then raised with
     * sl__peer_set_max_frame: no stranger makes this side allocate. */
    uint64_t max_frame;
} sl__net_hooks;

/* A transport with its progress thread running. 0, SL_ENOMEM, SL_EIO
 * (UCX could not start: its message), SL_EUNSUPPORTED (no UCX). */
int sl__net_create(const sl__net_hooks *hooks, sl__net **out);
/* Listens on host (NULL: every interface) and port (0: any); the port
 * bound in *bound. 0 or SL_EIO naming the address. */
int sl__net_listen(sl__net *n, const char *host, int port, int *bound);
/* Connects to host:port; frames may be sent at once (UCX queues them
 * until the connection is up). A connection that fails later comes to
 * on_close. 0, SL_EINVAL (a host that does not resolve), SL_EIO. */
int sl__net_connect(sl__net *n, const char *host, int port, sl__peer **out);
/* Sends the whole frames in b (copied). 0, SL_ENOMEM, SL_ESTATE (closed). */
int sl__net_send(sl__peer *p, const sl__bytes *b);
/* Sends a BATCH of el with no copy of its tensors: el is retained until
 * the transport is done with its memory, then done(arg, status) runs on
 * the progress thread (status 0, or negative when the link failed).
 * 0, or a negative code (then done is not called). */
int sl__net_send_batch(sl__peer *p, uint64_t split, int64_t index, sl_element *el,
                       void (*done)(void *arg, int status), void *arg);
/* Ends p's link (any thread): code and why go to on_close. */
void sl__net_close(sl__peer *p, int code, const char *why);
/* "10.0.0.5:41032" or what connect was given. */
const char *sl__peer_name(const sl__peer *p);
/* The caller's pointer for p (NULL until set). */
void *sl__peer_user(const sl__peer *p);
void sl__peer_set_user(sl__peer *p, void *user);
/* The transports UCX chose for p, as UCX names them ("tcp", "posix",
 * "sysv", "cma", "rc_mlx5" ...), each set sorted and space-separated: in
 * am those of the lanes that carry messages (small ones, and large ones
 * under UCX_RNDV_SCHEME=am), in rma those that carry rendezvous reads and
 * writes (the other large ones). 0, or SL_ESTATE (closed). */
int sl__peer_transports(sl__peer *p, char *am, char *rma, size_t cap);
/* The largest payload taken from p from now on. */
void sl__peer_set_max_frame(sl__peer *p, uint64_t bytes);
/* Waits until every queued send has been handed to the wire and
 * completed, up to timeout_ms: whether it did. */
bool sl__net_drain(sl__net *n, int timeout_ms);
/* Bytes of frames sent and received over all peers. */
void sl__net_bytes(const sl__net *n, uint64_t *sent, uint64_t *received);
/* Stops the thread, closes every link (no on_close for them), frees all.
 * NULL ok. */
void sl__net_free(sl__net *n);

#endif
