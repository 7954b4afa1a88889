// gloo_perf.cc: the peer benchmark for Gloo (Debian's libgloo-dev), with
// coll_perf's options and CSV (see perf_common.h).
//
// Gloo has no launcher: bench/compare.sh starts N processes, each with
// --rank R --nranks N --store DIR; they meet through a gloo FileStore in
// DIR and connect a full mesh over Gloo's tcp transport bound to --host
// (127.0.0.1). The calls are the ones PyTorch's ProcessGroupGloo makes:
//
//   all_reduce      gloo::allreduce, default algorithm (ring); in place
//                   = output buffer only, as PyTorch calls it
//   all_gather      gloo::allgather (in place: output only, own chunk in it)
//   broadcast       gloo::broadcast (out: root's input + everyone's output)
//   reduce          gloo::reduce (ring reduce-scatter, then gather to root)
//   reduce_scatter  gloo::ReduceScatterHalvingDoubling, in place only: Gloo
//                   has no out-of-place reduce-scatter (row left out)
//   alltoall        gloo::alltoall, out of place only (row left out)
//   p2p_*           unbound buffers: send/recv, then waitSend/waitRecv
//
// Timing and checking agreements (barrier, max, sum) go through the same
// context with their own tags.
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/config.h>
#include <gloo/reduce.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "perf_common.h"

namespace {

// Tags: one per kind of call, so that a control message can never be
// taken for a measured one.
enum : uint32_t {
  kTagColl = 1,
  kTagBarrier = 100,
  kTagMax = 101,
  kTagSum = 102,
};

std::shared_ptr<gloo::Context> g_ctx;
// The old-style reduce-scatter binds its buffer at construction: one per row.
std::unique_ptr<gloo::ReduceScatterHalvingDoubling<float>> g_rs;
// Point-to-point requests started since the last waitall.
struct P2pReq {
  std::unique_ptr<gloo::transport::UnboundBuffer> buf;
  bool send;
};
std::vector<P2pReq> g_reqs;

void sum_float(void* c, const void* a, const void* b, size_t n) {
  auto* o = static_cast<float*>(c);
  auto* x = static_cast<const float*>(a);
  auto* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; i++) o[i] = x[i] + y[i];
}

void max_double(void* c, const void* a, const void* b, size_t n) {
  auto* o = static_cast<double*>(c);
  auto* x = static_cast<const double*>(a);
  auto* y = static_cast<const double*>(b);
  for (size_t i = 0; i < n; i++) o[i] = x[i] > y[i] ? x[i] : y[i];
}

void sum_ll(void* c, const void* a, const void* b, size_t n) {
  auto* o = static_cast<long long*>(c);
  auto* x = static_cast<const long long*>(a);
  auto* y = static_cast<const long long*>(b);
  for (size_t i = 0; i < n; i++) o[i] = x[i] + y[i];
}

void gloo_barrier() {
  gloo::BarrierOptions o(g_ctx);
  o.setTag(kTagBarrier);
  gloo::barrier(o);
}

void gloo_max_doubles(double* v, int n) {
  gloo::AllreduceOptions o(g_ctx);
  o.setOutput(v, (size_t)n);
  o.setReduceFunction(max_double);
  o.setTag(kTagMax);
  gloo::allreduce(o);
}

long long gloo_sum_ll(long long v) {
  gloo::AllreduceOptions o(g_ctx);
  o.setOutput(&v, 1);
  o.setReduceFunction(sum_ll);
  o.setTag(kTagSum);
  gloo::allreduce(o);
  return v;
}

int gloo_supports(perf_coll_t coll, int inplace) {
  if (coll == PERF_REDUCE_SCATTER) return inplace;
  if (coll == PERF_ALLTOALL) return !inplace;
  return 1;
}

void gloo_prepare(perf_coll_t coll, int inplace, float* send, float* recv, size_t count,
                  int root) {
  (void)inplace, (void)recv, (void)root;
  g_rs.reset();
  if (coll != PERF_REDUCE_SCATTER) return;
  const int n = g_ctx->size;
  std::vector<float*> ptrs{send};  // in place: the whole n * count buffer
  std::vector<int> per_rank(n, (int)count);
  g_rs.reset(new gloo::ReduceScatterHalvingDoubling<float>(g_ctx, ptrs, (int)count * n,
                                                           per_rank));
}

void gloo_run(perf_coll_t coll, int inplace, float* send, float* recv, size_t count, int root) {
  const size_t n = (size_t)g_ctx->size;
  switch (coll) {
    case PERF_ALL_REDUCE: {
      gloo::AllreduceOptions o(g_ctx);
      if (!inplace) o.setInput(send, count);
      o.setOutput(recv, count);
      o.setReduceFunction(sum_float);
      o.setTag(kTagColl);
      gloo::allreduce(o);
      break;
    }
    case PERF_ALL_GATHER: {
      gloo::AllgatherOptions o(g_ctx);
      if (!inplace) o.setInput(send, count);
      o.setOutput(recv, count * n);
      o.setTag(kTagColl);
      gloo::allgather(o);
      break;
    }
    case PERF_BROADCAST: {
      gloo::BroadcastOptions o(g_ctx);
      if (!inplace && g_ctx->rank == root) o.setInput(send, count);
      o.setOutput(recv, count);
      o.setRoot(root);
      o.setTag(kTagColl);
      gloo::broadcast(o);
      break;
    }
    case PERF_REDUCE: {
      gloo::ReduceOptions o(g_ctx);
      if (!inplace) o.setInput(send, count);
      o.setOutput(recv, count);
      o.setRoot(root);
      o.setReduceFunction(sum_float);
      o.setTag(kTagColl);
      gloo::reduce(o);
      break;
    }
    case PERF_REDUCE_SCATTER:
      g_rs->run();
      break;
    case PERF_ALLTOALL: {
      gloo::AlltoallOptions o(g_ctx);
      o.setInput(send, count * n);
      o.setOutput(recv, count * n);
      o.setTag(kTagColl);
      gloo::alltoall(o);
      break;
    }
    default:
      break;
  }
}

void gloo_isend(const void* buf, size_t bytes, int peer, int tag) {
  auto b = g_ctx->createUnboundBuffer(const_cast<void*>(buf), bytes);
  b->send(peer, (uint64_t)tag);
  g_reqs.push_back(P2pReq{std::move(b), true});
}

void gloo_irecv(void* buf, size_t bytes, int peer, int tag) {
  auto b = g_ctx->createUnboundBuffer(buf, bytes);
  b->recv(peer, (uint64_t)tag);
  g_reqs.push_back(P2pReq{std::move(b), false});
}

void gloo_waitall() {
  for (auto& r : g_reqs) {
    if (r.send)
      r.buf->waitSend();
    else
      r.buf->waitRecv();
  }
  g_reqs.clear();
}

}  // namespace

int main(int argc, char** argv) {
  perf_opts_t opts;
  perf_parse(argc, argv, &opts, 0);
  if (opts.rank < 0 || opts.nranks < 1 || opts.rank >= opts.nranks || !opts.store) {
    fprintf(stderr, "gloo_perf: needs --rank R --nranks N --store DIR (0 <= R < N)\n");
    return 2;
  }

  perf_backend_t be;
  memset(&be, 0, sizeof(be));
  be.library = "gloo";
  snprintf(be.version, sizeof(be.version), "%d.%d.%d", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR,
           GLOO_VERSION_PATCH);
  be.rank = opts.rank;
  be.nranks = opts.nranks;
  be.barrier = gloo_barrier;
  be.max_doubles = gloo_max_doubles;
  be.sum_ll = gloo_sum_ll;
  be.supports = gloo_supports;
  be.prepare = gloo_prepare;
  be.run = gloo_run;
  // ReduceScatterHalvingDoubling, like MPI, leaves the block at the start.
  be.rs_inplace_result_at_start = 1;
  be.isend = gloo_isend;
  be.irecv = gloo_irecv;
  be.waitall = gloo_waitall;

  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = opts.host;
    attr.ai_family = AF_INET;
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(opts.store);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(opts.rank, opts.nranks);
    // Longer than any single call here; compare.sh bounds the whole run.
    ctx->setTimeout(std::chrono::seconds(120));
    ctx->connectFullMesh(store, dev);
    g_ctx = ctx;
    long long wrong = perf_run(&opts, &be);
    gloo_barrier();
    g_rs.reset();
    g_ctx.reset();
    return opts.rank == 0 && wrong ? 1 : 0;
  } catch (const std::exception& e) {
    fprintf(stderr, "gloo_perf: rank %d: %s\n", opts.rank, e.what());
    return 1;
  }
}
