// cuDNN for convolution (forward, backward-data, backward-filter; any stride, padding, dilation and
// groups), batch normalization (training and evaluation, float32/float64) and softmax along a
// strided dim.
//
// Algorithm choice, cached per (shape, dtype, parameters, math mode, flags) for the process:
//   cudnn::benchmark() on  -> cudnnFind*AlgorithmEx times every algorithm once (as cudnn.benchmark);
//   otherwise              -> cuDNN's heuristics (cudnnGet*Algorithm_v7);
// in either case skipping algorithms that are not deterministic when cudnn::deterministic() or
// use_deterministic_algorithms(true) (core/determinism.h) is on,
// and tensor-core (TF32) variants for float32 unless cudnn::allow_tf32(). The ranked algorithms are
// tried in order until one runs (NOT_SUPPORTED, EXECUTION_FAILED or a workspace that cannot be
// allocated moves on to the next; cuda/cudnn_plan.h), and that one is cached. Workspaces come from the
// caching allocator. Every other cudnnStatus_t is checked and thrown with cuDNN's own message.
#include <cudnn.h>

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <vector>

#include "core/determinism.h"
#include "core/impl.h"
#include "cuda/allocator.h"
#include "cuda/common.h"
#include "cuda/cudnn_plan.h"
#include "cuda/handles.h"
#include "cuda/kernels.h"

namespace nabla::cuda {

namespace {

// Only deterministic algorithms: asked for by cuDNN's own switch or by the global one (as PyTorch).
bool want_deterministic() { return cudnn::deterministic() || are_deterministic_algorithms_enabled(); }

[[noreturn]] void throw_cudnn(cudnnStatus_t s, const char* what, const char* file, int line) {
  throw CudaError(internal::str("cuDNN error: ", cudnnGetErrorString(s), " (status ", static_cast<int>(s), ") in ",
                                what, " at ", file, ":", line));
}

#define NABLA_CUDNN_CHECK(expr)                          \
  do {                                                   \
    cudnnStatus_t nabla_st_ = (expr);                    \
    if (nabla_st_ != CUDNN_STATUS_SUCCESS) [[unlikely]]  \
      throw_cudnn(nabla_st_, #expr, __FILE__, __LINE__); \
  } while (0)

cudnnHandle_t create_handle(int device, cudaStream_t stream) {
  DeviceScope ds(device);
  cudnnHandle_t h;
  NABLA_CUDNN_CHECK(cudnnCreate(&h));
  NABLA_CUDNN_CHECK(cudnnSetStream(h, stream));
  return h;
}

HandlePool<cudnnHandle_t>& pool() {
  static auto* p = new HandlePool<cudnnHandle_t>(&create_handle);
  return *p;
}

// ---- descriptors (RAII) -----------------------------------------------------------------------------
struct TensorDesc {
  cudnnTensorDescriptor_t d{};
  TensorDesc() { NABLA_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d)); }
  ~TensorDesc() { (void)cudnnDestroyTensorDescriptor(d); }  // (a destructor: nothing to report to)
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
};
struct FilterDesc {
  cudnnFilterDescriptor_t d{};
  FilterDesc() { NABLA_CUDNN_CHECK(cudnnCreateFilterDescriptor(&d)); }
  ~FilterDesc() { (void)cudnnDestroyFilterDescriptor(d); }  // (a destructor: nothing to report to)
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};
struct ConvDesc {
  cudnnConvolutionDescriptor_t d{};
  ConvDesc() { NABLA_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&d)); }
  ~ConvDesc() { (void)cudnnDestroyConvolutionDescriptor(d); }  // (a destructor: nothing to report to)
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

bool fits_int(int64_t v) { return v >= 0 && v <= INT_MAX; }

cudnnDataType_t data_type(DType dt, const char* op) {
  switch (dt) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::f64: return CUDNN_DATA_DOUBLE;
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    default: break;
  }
  throw DTypeError(internal::str(op, ": expected a floating dtype on CUDA, got ", dt));
}

int as_int(int64_t v, const char* op) {
  NABLA_CHECK(NotImplemented, fits_int(v), op, ": a size of ", v, " exceeds what cuDNN takes (2^31 - 1)");
  return static_cast<int>(v);
}

// A contiguous NCHW or NCDHW tensor (4 or 5 dims), or a shape given as `dims`.
void set_nd(TensorDesc& t, cudnnDataType_t type, IntArrayRef dims, const char* op) {
  if (dims.size() == 4) {
    NABLA_CUDNN_CHECK(cudnnSetTensor4dDescriptor(t.d, CUDNN_TENSOR_NCHW, type, as_int(dims[0], op), as_int(dims[1], op),
                                                 as_int(dims[2], op), as_int(dims[3], op)));
    return;
  }
  int n = static_cast<int>(dims.size());
  std::vector<int> d(n), st(n);
  int64_t stride = 1;
  for (int i = n - 1; i >= 0; --i) {
    d[i] = as_int(dims[i], op);
    st[i] = as_int(stride, op);
    stride *= dims[i];
  }
  NABLA_CHECK(NotImplemented, stride <= INT_MAX, op,
              ": tensors of more than 2^31 - 1 elements are not supported by cuDNN");
  NABLA_CUDNN_CHECK(cudnnSetTensorNdDescriptor(t.d, type, n, d.data(), st.data()));
}

// Scaling factors: double for double data, float otherwise.
struct Scaling {
  double d0 = 0, d1 = 1;
  float f0 = 0, f1 = 1;
  bool dbl;
  explicit Scaling(DType dt) : dbl(dt == DType::f64) {}
  const void* zero() const { return dbl ? static_cast<const void*>(&d0) : static_cast<const void*>(&f0); }
  const void* one() const { return dbl ? static_cast<const void*>(&d1) : static_cast<const void*>(&f1); }
};

// ---- convolution setup and algorithm choice ---------------------------------------------------------
enum class Kind { fwd = 0, bwd_data = 1, bwd_filter = 2 };

struct Conv {
  TensorDesc x, y;  // input, output (gradients share them)
  FilterDesc w;
  ConvDesc conv;
  cudnnDataType_t type;
  cudnnMathType_t math;
  bool strict_fma;  // float32 without TF32: only FMA algorithms
  std::vector<int64_t> key;
};

// x: (N, C, *spatial), w: (O, C/g, *k), y: (N, O, *spatial_out), all contiguous, with p.ndim (2 or 3)
// spatial dims.
void setup(Conv& c, const Tensor& x, const Tensor& w, const Tensor& y, const ConvParams& p, const char* op) {
  DType dt = x.dtype();
  c.type = data_type(dt, op);
  NABLA_CHECK(NotImplemented, p.ndim == 2 || p.ndim == 3, op, ": cuDNN convolutions over ", p.ndim,
              " spatial dims are not supported");
  set_nd(c.x, c.type, x.sizes(), op);
  set_nd(c.y, c.type, y.sizes(), op);
  cudnnDataType_t compute = dt == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  const int nd = static_cast<int>(p.ndim);
  std::vector<int> wd(nd + 2), pad(nd), str(nd), dil(nd);
  for (int i = 0; i < nd + 2; ++i) wd[i] = as_int(w.sizes()[i], op);
  for (int i = 0; i < nd; ++i) {
    pad[i] = as_int(p.padding[i], op);
    str[i] = as_int(p.stride[i], op);
    dil[i] = as_int(p.dilation[i], op);
  }
  NABLA_CUDNN_CHECK(cudnnSetFilterNdDescriptor(c.w.d, c.type, CUDNN_TENSOR_NCHW, nd + 2, wd.data()));
  NABLA_CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(c.conv.d, nd, pad.data(), str.data(), dil.data(),
                                                    CUDNN_CROSS_CORRELATION, compute));
  NABLA_CUDNN_CHECK(cudnnSetConvolutionGroupCount(c.conv.d, as_int(p.groups, op)));
  if (dt == DType::f32) {
    c.strict_fma = !cudnn::allow_tf32();
    c.math = c.strict_fma ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
  } else if (dt == DType::f64) {
    c.strict_fma = false;
    c.math = CUDNN_DEFAULT_MATH;
  } else {
    c.strict_fma = false;
    c.math = CUDNN_TENSOR_OP_MATH;
  }
  NABLA_CUDNN_CHECK(cudnnSetConvolutionMathType(c.conv.d, c.math));
  c.key = {static_cast<int64_t>(dt), p.ndim, p.groups, static_cast<int64_t>(c.math), want_deterministic(),
           cudnn::benchmark()};
  for (int i = 0; i < nd; ++i) c.key.insert(c.key.end(), {p.stride[i], p.padding[i], p.dilation[i]});
  for (const Tensor* t : {&x, &w, &y})
    for (int64_t s : t->sizes()) c.key.push_back(s);
}

// The algorithm that ran for a configuration (cached for the process).
using conv_algo::Candidate;

std::mutex g_cache_mu;
std::map<std::vector<int64_t>, Candidate>& cache() {
  static auto* m = new std::map<std::vector<int64_t>, Candidate>();
  return *m;
}

// Workspace size of one algorithm (SIZE_MAX when it does not apply).
size_t workspace_size(cudnnHandle_t h, const Conv& c, Kind kind, int algo) {
  size_t s = 0;
  cudnnStatus_t st;
  switch (kind) {
    case Kind::fwd:
      st = cudnnGetConvolutionForwardWorkspaceSize(h, c.x.d, c.w.d, c.conv.d, c.y.d,
                                                   static_cast<cudnnConvolutionFwdAlgo_t>(algo), &s);
      break;
    case Kind::bwd_data:
      st = cudnnGetConvolutionBackwardDataWorkspaceSize(h, c.w.d, c.y.d, c.conv.d, c.x.d,
                                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), &s);
      break;
    default:
      st = cudnnGetConvolutionBackwardFilterWorkspaceSize(h, c.x.d, c.y.d, c.conv.d, c.w.d,
                                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), &s);
      break;
  }
  return st == CUDNN_STATUS_SUCCESS ? s : SIZE_MAX;
}

int algo_count(Kind kind) {
  switch (kind) {
    case Kind::fwd: return CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
    case Kind::bwd_data: return CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
    default: return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  }
}

// The common fields of cuDNN's three perf-result structs.
struct Perf {
  int algo;
  cudnnStatus_t status;
  size_t memory;
  cudnnDeterminism_t determinism;
  cudnnMathType_t math;
};
template <class P>
std::vector<Perf> to_perf(const P* r, int n) {
  std::vector<Perf> v;
  for (int i = 0; i < n; ++i)
    v.push_back({static_cast<int>(r[i].algo), r[i].status, r[i].memory, r[i].determinism, r[i].mathType});
  return v;
}

// Runs cuDNN's search (benchmark) or heuristics; `a`, `b`, `out` are the operation's operands in
// the order of its call (fwd: x, w, y; bwd_data: w, dy, dx; bwd_filter: x, dy, dw).
std::vector<Perf> candidates(cudnnHandle_t h, const Conv& c, Kind kind, const void* a, const void* b, void* out,
                             int device) {
  const int n = algo_count(kind);
  int got = 0;
  if (cudnn::benchmark()) {
    // Enough workspace for the hungriest algorithm, as far as memory allows.
    size_t want = 0;
    for (int algo = 0; algo < n; ++algo) {
      size_t s = workspace_size(h, c, kind, algo);
      if (s != SIZE_MAX) want = std::max(want, s);
    }
    // Probes that fail neither empty the cache nor count as out-of-memory (try_scratch).
    want = std::min(want, available_bytes(device));
    Tensor ws;
    while (want > 0) {
      ws = try_scratch(want, device);
      if (ws.defined()) break;
      want /= 2;
      if (want < (size_t(1) << 20)) want = 0;
    }
    void* wp = want > 0 ? ws.data_ptr() : nullptr;
    switch (kind) {
      case Kind::fwd: {
        std::vector<cudnnConvolutionFwdAlgoPerf_t> r(n);
        NABLA_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, c.x.d, a, c.w.d, b, c.conv.d, c.y.d, out, n, &got,
                                                                 r.data(), wp, want));
        return to_perf(r.data(), got);
      }
      case Kind::bwd_data: {
        std::vector<cudnnConvolutionBwdDataAlgoPerf_t> r(n);
        NABLA_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(h, c.w.d, a, c.y.d, b, c.conv.d, c.x.d, out, n,
                                                                      &got, r.data(), wp, want));
        return to_perf(r.data(), got);
      }
      default: {
        std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> r(n);
        NABLA_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, c.x.d, a, c.y.d, b, c.conv.d, c.w.d, out, n,
                                                                        &got, r.data(), wp, want));
        return to_perf(r.data(), got);
      }
    }
  }
  switch (kind) {
    case Kind::fwd: {
      std::vector<cudnnConvolutionFwdAlgoPerf_t> r(n);
      NABLA_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, c.x.d, c.w.d, c.conv.d, c.y.d, n, &got, r.data()));
      return to_perf(r.data(), got);
    }
    case Kind::bwd_data: {
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> r(n);
      NABLA_CUDNN_CHECK(
          cudnnGetConvolutionBackwardDataAlgorithm_v7(h, c.w.d, c.y.d, c.conv.d, c.x.d, n, &got, r.data()));
      return to_perf(r.data(), got);
    }
    default: {
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> r(n);
      NABLA_CUDNN_CHECK(
          cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, c.x.d, c.y.d, c.conv.d, c.w.d, n, &got, r.data()));
      return to_perf(r.data(), got);
    }
  }
}

// Maps a cuDNN status of a convolution call to what the choice does next: try the next candidate
// (NOT_SUPPORTED, EXECUTION_FAILED, ALLOC_FAILED), or stop with the error (anything else).
conv_algo::Outcome outcome_of(cudnnStatus_t st, const char* op) {
  switch (st) {
    case CUDNN_STATUS_SUCCESS: return conv_algo::Outcome::ran;
    case CUDNN_STATUS_NOT_SUPPORTED: return conv_algo::Outcome::not_supported;
    case CUDNN_STATUS_EXECUTION_FAILED: return conv_algo::Outcome::execution_failed;
    case CUDNN_STATUS_ALLOC_FAILED: return conv_algo::Outcome::out_of_memory;
    default: throw CudaError(internal::str(op, ": cuDNN error: ", cudnnGetErrorString(st)));
  }
}

// Runs one convolution (`run(algo, workspace, workspace_bytes)` returns cuDNN's status) with the
// algorithm cached for this configuration; the first time, with each acceptable algorithm of
// cuDNN's ranked list in turn until one runs (cudnn_plan.h), which is then cached. Candidates whose
// workspace exceeds the free plus cached memory are skipped, and a failed workspace allocation
// moves on to the next candidate.
template <class Run>
void run_conv(cudnnHandle_t h, Conv& c, Kind kind, const void* a, const void* b, void* out, int device, const char* op,
              Run&& run) {
  std::vector<int64_t> key = c.key;
  key.push_back(static_cast<int64_t>(kind));
  key.push_back(device);
  auto attempt = [&](const Candidate& cand) {
    NABLA_CUDNN_CHECK(cudnnSetConvolutionMathType(c.conv.d, static_cast<cudnnMathType_t>(cand.math)));
    Tensor ws;
    if (cand.workspace > 0) {
      ws = try_scratch(cand.workspace, device);
      if (!ws.defined()) return conv_algo::Outcome::out_of_memory;
    }
    return outcome_of(run(cand.algo, cand.workspace > 0 ? ws.data_ptr() : nullptr, cand.workspace), op);
  };
  {
    std::unique_lock lock(g_cache_mu);
    auto it = cache().find(key);
    if (it != cache().end()) {
      Candidate cand = it->second;
      lock.unlock();
      // The algorithm that ran before: its workspace is required (scratch releases the cache and
      // retries before it reports out-of-memory), and any failure is an error.
      NABLA_CUDNN_CHECK(cudnnSetConvolutionMathType(c.conv.d, static_cast<cudnnMathType_t>(cand.math)));
      Tensor ws = cand.workspace > 0 ? scratch(cand.workspace, device) : Tensor();
      NABLA_CUDNN_CHECK(run(cand.algo, cand.workspace > 0 ? ws.data_ptr() : nullptr, cand.workspace));
      return;
    }
  }
  std::vector<Candidate> ranked;
  for (const Perf& p : candidates(h, c, kind, a, b, out, device))
    ranked.push_back(
        {p.algo, p.status == CUDNN_STATUS_SUCCESS, p.determinism == CUDNN_DETERMINISTIC, static_cast<int>(p.math), 0});
  std::vector<Candidate> list =
      conv_algo::acceptable(ranked, {want_deterministic(), c.strict_fma, static_cast<int>(CUDNN_FMA_MATH)});
  for (Candidate& cand : list) {  // the workspace of each algorithm in the math mode it runs with
    NABLA_CUDNN_CHECK(cudnnSetConvolutionMathType(c.conv.d, static_cast<cudnnMathType_t>(cand.math)));
    cand.workspace = workspace_size(h, c, kind, cand.algo);
  }
  size_t i = conv_algo::first_that_runs(list, available_bytes(device), attempt, op);
  std::lock_guard lock(g_cache_mu);
  cache()[key] = list[i];
}

// Runs f(first, count) over slices of a batch too large for one cuDNN call (conv_batch_chunk) and
// returns true; false, without calling f, when one call takes the whole batch.
template <class F>
bool over_batch_slices(int64_t batch, int64_t in_per_image, int64_t out_per_image, const char* op, F&& f) {
  const int64_t chunk = conv_batch_chunk(batch, in_per_image, out_per_image);
  if (chunk >= batch) return false;
  NABLA_CHECK(NotImplemented, chunk > 0, op, ": one image of ", std::max(in_per_image, out_per_image),
              " elements exceeds what cuDNN takes (2^31 - 1 per tensor)");
  for (int64_t first = 0; first < batch; first += chunk) f(first, std::min(chunk, batch - first));
  return true;
}

// dw = (or += with accumulate) the weight gradient of contiguous x and gy.
void weight_grad_call(const Tensor& x, const Tensor& gy, const ConvParams& p, const Tensor& dw, bool accumulate) {
  const int device = device_of(dw);
  cudaStream_t stream = stream_for(device);
  Lease<cudnnHandle_t> h(pool(), device, stream);
  Conv c;
  setup(c, x, dw, gy, p, "conv_weight_grad");
  Scaling s(x.dtype());
  run_conv(h.get(), c, Kind::bwd_filter, x.data_ptr(), gy.data_ptr(), dw.data_ptr(), device, "conv_weight_grad",
           [&](int algo, void* ws, size_t ws_bytes) {
             return cudnnConvolutionBackwardFilter(h.get(), s.one(), c.x.d, x.data_ptr(), c.y.d, gy.data_ptr(),
                                                   c.conv.d, static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo), ws,
                                                   ws_bytes, accumulate ? s.one() : s.zero(), c.w.d, dw.data_ptr());
           });
}

}  // namespace

void conv(const Tensor& x_in, const Tensor& w_in, const Tensor& bias, const ConvParams& p, const Tensor& out) {
  DeviceScope ds(out);
  if (out.numel() == 0) return;
  Tensor x = contiguous(x_in), w = contiguous(w_in);
  Tensor y = out.is_contiguous() ? out : internal::make_empty(out.sizes(), out.dtype(), out.device());
  const int64_t batch = y.sizes()[0];  // > 0: out is not empty
  if (over_batch_slices(batch, x.numel() / batch, y.numel() / batch, "conv", [&](int64_t first, int64_t count) {
        conv(x.narrow(0, first, count), w, bias, p, y.narrow(0, first, count));
      })) {
    if (!y.is_same(out)) device_copy(y, out);
    return;
  }
  const int device = device_of(out);
  cudaStream_t stream = stream_for(device);
  Lease<cudnnHandle_t> h(pool(), device, stream);
  Conv c;
  if (x.numel() == 0 || w.numel() == 0) {
    // No input channels (or an empty padded image): cuDNN rejects size-0 descriptors, so only the
    // output's is set, for the bias.
    c.type = data_type(x.dtype(), "conv");
    set_nd(c.y, c.type, y.sizes(), "conv");
    fill(y, 0);
  } else {
    setup(c, x, w, y, p, "conv");
    Scaling s(x.dtype());
    run_conv(h.get(), c, Kind::fwd, x.data_ptr(), w.data_ptr(), y.data_ptr(), device, "conv",
             [&](int algo, void* ws, size_t ws_bytes) {
               return cudnnConvolutionForward(h.get(), s.one(), c.x.d, x.data_ptr(), c.w.d, w.data_ptr(), c.conv.d,
                                              static_cast<cudnnConvolutionFwdAlgo_t>(algo), ws, ws_bytes, s.zero(),
                                              c.y.d, y.data_ptr());
             });
  }
  if (bias.defined()) {
    Tensor b = contiguous(bias);
    TensorDesc bd;
    Shape bshape(static_cast<size_t>(y.dim()), 1);
    bshape[1] = b.numel();
    set_nd(bd, c.type, bshape, "conv");
    Scaling s(x.dtype());
    NABLA_CUDNN_CHECK(cudnnAddTensor(h.get(), s.one(), bd.d, b.data_ptr(), s.one(), c.y.d, y.data_ptr()));
  }
  if (!y.is_same(out)) device_copy(y, out);
}

void conv_input_grad(const Tensor& gy_in, const Tensor& w_in, const ConvParams& p, const Tensor& gx) {
  DeviceScope ds(gx);
  if (gx.numel() == 0) return;
  Tensor gy = contiguous(gy_in), w = contiguous(w_in);
  Tensor dx = gx.is_contiguous() ? gx : internal::make_empty(gx.sizes(), gx.dtype(), gx.device());
  const int64_t batch = dx.sizes()[0];
  if (gy.numel() == 0 || w.numel() == 0) {
    fill(dx, 0);
  } else if (over_batch_slices(batch, dx.numel() / batch, gy.numel() / batch, "conv_input_grad",
                               [&](int64_t first, int64_t count) {
                                 conv_input_grad(gy.narrow(0, first, count), w, p, dx.narrow(0, first, count));
                               })) {
    // done slice by slice
  } else {
    const int device = device_of(gx);
    cudaStream_t stream = stream_for(device);
    Lease<cudnnHandle_t> h(pool(), device, stream);
    Conv c;
    setup(c, dx, w, gy, p, "conv_input_grad");
    Scaling s(gy.dtype());
    run_conv(h.get(), c, Kind::bwd_data, w.data_ptr(), gy.data_ptr(), dx.data_ptr(), device, "conv_input_grad",
             [&](int algo, void* ws, size_t ws_bytes) {
               return cudnnConvolutionBackwardData(h.get(), s.one(), c.w.d, w.data_ptr(), c.y.d, gy.data_ptr(),
                                                   c.conv.d, static_cast<cudnnConvolutionBwdDataAlgo_t>(algo), ws,
                                                   ws_bytes, s.zero(), c.x.d, dx.data_ptr());
             });
  }
  if (!dx.is_same(gx)) device_copy(dx, gx);
}

void conv_weight_grad(const Tensor& x_in, const Tensor& gy_in, const ConvParams& p, const Tensor& gw) {
  DeviceScope ds(gw);
  if (gw.numel() == 0) return;
  Tensor x = contiguous(x_in), gy = contiguous(gy_in);
  Tensor dw = gw.is_contiguous() ? gw : internal::make_empty(gw.sizes(), gw.dtype(), gw.device());
  if (x.numel() == 0 || gy.numel() == 0) {
    fill(dw, 0);  // no images: no gradient
  } else {
    // The first slice of a split batch writes dw, the others add to it, in batch order.
    const int64_t batch = x.sizes()[0];
    bool accumulate = false;
    auto slice = [&](int64_t first, int64_t count) {
      weight_grad_call(x.narrow(0, first, count), gy.narrow(0, first, count), p, dw, accumulate);
      accumulate = true;
    };
    if (!over_batch_slices(batch, x.numel() / batch, gy.numel() / batch, "conv_weight_grad", slice))
      weight_grad_call(x, gy, p, dw, false);
  }
  if (!dw.is_same(gw)) device_copy(dw, gw);
}

// ---- batch normalization ----------------------------------------------------------------------------
// x (N, C, ...) is viewed as (N, C, S, 1) in cuDNN's spatial mode: statistics per channel over N and S;
// within batch_norm_in_cudnn_limits (cudnn_plan.h) only.
bool has_fused_batch_norm(const Tensor& x, bool training, double eps) {
  if (!x.is_cuda() || (x.dtype() != DType::f32 && x.dtype() != DType::f64)) return false;
  return batch_norm_in_cudnn_limits(x.dim(), x.dim() > 0 ? x.sizes()[0] : 0, x.numel(), training, eps,
                                    CUDNN_BN_MIN_EPSILON);
}

namespace {
struct BnDescs {
  TensorDesc x, p;  // data (N, C, S, 1) and per-channel (1, C, 1, 1)
  BnDescs(const Tensor& t) {
    int64_t N = t.sizes()[0], C = t.sizes()[1], S = t.numel() / (N * C);
    NABLA_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x.d, CUDNN_TENSOR_NCHW, data_type(t.dtype(), "batch_norm"),
                                                 as_int(N, "batch_norm"), as_int(C, "batch_norm"),
                                                 as_int(S, "batch_norm"), 1));
    NABLA_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(p.d, x.d, CUDNN_BATCHNORM_SPATIAL));
  }
};

// A contiguous per-channel tensor, or `fill` when undefined.
Tensor channel_param(const Tensor& p, const Tensor& like, double fill_value) {
  if (p.defined()) return contiguous(p);
  Tensor t = internal::make_empty({like.sizes()[1]}, like.dtype(), like.device());
  fill(t, fill_value);
  return t;
}
}  // namespace

void batch_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                const Tensor& running_var, bool training, double momentum, double eps, const Tensor& out,
                const Tensor& save_mean, const Tensor& save_invstd) {
  DeviceScope ds(out);
  Tensor x = contiguous(x_in);
  Tensor y = out.is_contiguous() ? out : internal::make_empty(out.sizes(), out.dtype(), out.device());
  BnDescs d(x);
  Tensor w = channel_param(weight, x, 1), b = channel_param(bias, x, 0);
  // cuDNN updates the running statistics in place: they must be contiguous. It takes both or
  // neither: a missing one gets a throwaway buffer.
  Tensor rm = running_mean.defined() ? contiguous(running_mean) : Tensor();
  Tensor rv = running_var.defined() ? contiguous(running_var) : Tensor();
  if (training && rm.defined() != rv.defined()) {
    if (!rm.defined()) rm = channel_param(Tensor(), x, 0);
    else rv = channel_param(Tensor(), x, 1);
  }
  const int device = device_of(out);
  Lease<cudnnHandle_t> h(pool(), device, stream_for(device));
  Scaling s(x.dtype());
  if (training) {
    NABLA_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
        h.get(), CUDNN_BATCHNORM_SPATIAL, s.one(), s.zero(), d.x.d, x.data_ptr(), d.x.d, y.data_ptr(), d.p.d,
        w.data_ptr(), b.data_ptr(), momentum, rm.defined() ? rm.data_ptr() : nullptr,
        rv.defined() ? rv.data_ptr() : nullptr, eps, save_mean.data_ptr(), save_invstd.data_ptr()));
    if (running_mean.defined() && !rm.is_same(running_mean)) device_copy(rm, running_mean);
    if (running_var.defined() && !rv.is_same(running_var)) device_copy(rv, running_var);
  } else {
    NABLA_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
        h.get(), CUDNN_BATCHNORM_SPATIAL, s.one(), s.zero(), d.x.d, x.data_ptr(), d.x.d, y.data_ptr(), d.p.d,
        w.data_ptr(), b.data_ptr(), rm.data_ptr(), rv.data_ptr(), eps));
  }
  if (!y.is_same(out)) device_copy(y, out);
}

void batch_norm_backward(const Tensor& grad_out, const Tensor& x_in, const Tensor& weight, const Tensor& save_mean,
                         const Tensor& save_invstd, double eps, const Tensor& grad_x, const Tensor& grad_weight,
                         const Tensor& grad_bias) {
  DeviceScope ds(grad_x);
  Tensor x = contiguous(x_in), g = contiguous(grad_out);
  Tensor dx = grad_x.is_contiguous() ? grad_x : internal::make_empty(grad_x.sizes(), grad_x.dtype(), grad_x.device());
  int64_t C = x.sizes()[1];
  Tensor dw = grad_weight.defined() && grad_weight.is_contiguous() ? grad_weight
                                                                   : internal::make_empty({C}, x.dtype(), x.device());
  Tensor db =
      grad_bias.defined() && grad_bias.is_contiguous() ? grad_bias : internal::make_empty({C}, x.dtype(), x.device());
  BnDescs d(x);
  Tensor w = channel_param(weight, x, 1);
  const int device = device_of(grad_x);
  Lease<cudnnHandle_t> h(pool(), device, stream_for(device));
  Scaling s(x.dtype());
  NABLA_CUDNN_CHECK(cudnnBatchNormalizationBackward(h.get(), CUDNN_BATCHNORM_SPATIAL, s.one(), s.zero(), s.one(),
                                                    s.zero(), d.x.d, x.data_ptr(), d.x.d, g.data_ptr(), d.x.d,
                                                    dx.data_ptr(), d.p.d, w.data_ptr(), dw.data_ptr(), db.data_ptr(),
                                                    eps, save_mean.data_ptr(), save_invstd.data_ptr()));
  if (!dx.is_same(grad_x)) device_copy(dx, grad_x);
  if (grad_weight.defined() && !dw.is_same(grad_weight)) device_copy(dw, grad_weight);
  if (grad_bias.defined() && !db.is_same(grad_bias)) device_copy(db, grad_bias);
}

// ---- softmax ------------------------------------------------------------------------------------------
namespace {
bool softmax_desc(TensorDesc& t, DType dt, int64_t outer, int64_t len, int64_t inner) {
  cudnnDataType_t type;
  switch (dt) {
    case DType::f32: type = CUDNN_DATA_FLOAT; break;
    case DType::f64: type = CUDNN_DATA_DOUBLE; break;
    case DType::f16: type = CUDNN_DATA_HALF; break;
    default: return false;
  }
  if (!fits_int(outer) || !fits_int(len) || !fits_int(inner) || outer * len * inner > INT_MAX) return false;
  NABLA_CUDNN_CHECK(cudnnSetTensor4dDescriptor(t.d, CUDNN_TENSOR_NCHW, type, static_cast<int>(outer),
                                               static_cast<int>(len), static_cast<int>(inner), 1));
  return true;
}
}  // namespace

// x, out: contiguous (outer, len, inner); softmax over len (cuDNN's channel mode).
bool cudnn_softmax(const Tensor& x, int64_t outer, int64_t len, int64_t inner, bool log, const Tensor& out) {
  TensorDesc d;
  if (!softmax_desc(d, x.dtype(), outer, len, inner)) return false;
  const int device = device_of(out);
  Lease<cudnnHandle_t> h(pool(), device, stream_for(device));
  Scaling s(x.dtype());
  NABLA_CUDNN_CHECK(cudnnSoftmaxForward(h.get(), log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE,
                                        CUDNN_SOFTMAX_MODE_CHANNEL, s.one(), d.d, x.data_ptr(), s.zero(), d.d,
                                        out.data_ptr()));
  return true;
}

// g, y, out: contiguous (outer, len, inner); y is the forward output (log-softmax when log).
bool cudnn_softmax_backward(const Tensor& g, const Tensor& y, int64_t outer, int64_t len, int64_t inner, bool log,
                            const Tensor& out) {
  TensorDesc d;
  if (!softmax_desc(d, g.dtype(), outer, len, inner)) return false;
  const int device = device_of(out);
  Lease<cudnnHandle_t> h(pool(), device, stream_for(device));
  Scaling s(g.dtype());
  NABLA_CUDNN_CHECK(cudnnSoftmaxBackward(h.get(), log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE,
                                         CUDNN_SOFTMAX_MODE_CHANNEL, s.one(), d.d, y.data_ptr(), d.d, g.data_ptr(),
                                         s.zero(), d.d, out.data_ptr()));
  return true;
}

}  // namespace nabla::cuda
