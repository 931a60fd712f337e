// The CUDA Backend: registers itself with core when libnabla is loaded (without touching the driver;
// the first device query does that) and forwards each kernel entry to cuda/kernels.h. Every entry
// of core/backend.h has a CUDA implementation (batch norm: float32 and float64, through cuDNN).
#include "core/backend.h"
#include "cuda/allocator.h"
#include "cuda/common.h"
#include "cuda/kernels.h"

namespace nabla::cuda {

void install_hooks();  // device.cpp

namespace {

class CudaBackend final : public Backend {
 public:
  const char* name() const override { return "cuda"; }
  Allocator& allocator(Device device) override {
    if (device.is_cpu()) return pinned_allocator();
    int n = device_count();
    check<DeviceError>(device.index >= 0 && device.index < n, "device ", device, " does not exist (", n,
                       " CUDA device", n == 1 ? "" : "s", " available)");
    return device_allocator(device.index);
  }

  void copy(const Tensor& src, const Tensor& dst, bool non_blocking) override { cuda::copy(src, dst, non_blocking); }
  void fill(const Tensor& dst, Scalar v) override { cuda::fill(dst, v); }
  void unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) override {
    cuda::unary(op, x, out, p0, p1);
  }
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, Scalar alpha) override {
    cuda::binary(op, a, b, out, alpha);
  }
  void where(const Tensor& c, const Tensor& a, const Tensor& b, const Tensor& out) override {
    cuda::where(c, a, b, out);
  }
  void reduce(ReduceOp op, const Tensor& x, IntArrayRef dims, const Tensor& out) override {
    cuda::reduce(op, x, dims, out);
  }
  void arg_reduce(ReduceOp op, const Tensor& x, int64_t dim, const Tensor& v, const Tensor& i) override {
    cuda::arg_reduce(op, x, dim, v, i);
  }
  void scan(ScanOp op, const Tensor& x, int64_t dim, const Tensor& out) override { cuda::scan(op, x, dim, out); }
  void sort(const Tensor& x, int64_t dim, bool desc, const Tensor& v, const Tensor& i) override {
    cuda::sort(x, dim, desc, v, i);
  }
  void topk(const Tensor& x, int64_t k, int64_t dim, bool largest, const Tensor& v, const Tensor& i) override {
    cuda::topk(x, k, dim, largest, v, i);
  }
  void softmax(const Tensor& x, int64_t dim, bool log, const Tensor& out) override {
    cuda::softmax(x, dim, log, out);
  }
  void softmax_backward(const Tensor& g, const Tensor& y, int64_t dim, bool log, const Tensor& out) override {
    cuda::softmax_backward(g, y, dim, log, out);
  }
  void index_select(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) override {
    cuda::index_select(x, dim, index, out);
  }
  void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) override {
    cuda::index_add(out, dim, index, src);
  }
  void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) override {
    cuda::gather(x, dim, index, out);
  }
  void scatter(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, bool acc) override {
    cuda::scatter(out, dim, index, src, acc);
  }
  Tensor nonzero(const Tensor& x) override { return cuda::nonzero(x); }
  void random(RandomOp op, const Tensor& out, double p0, double p1, Generator& gen) override {
    cuda::random(op, out, p0, p1, gen);
  }
  void random_int(const Tensor& out, int64_t low, int64_t high, Generator& gen) override {
    cuda::random_int(out, low, high, gen);
  }
  void matmul(const Tensor& a, const Tensor& b, const Tensor& out, double alpha, double beta) override {
    cuda::matmul(a, b, out, alpha, beta);
  }
  void conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p, const Tensor& out) override {
    cuda::conv2d(x, w, b, p, out);
  }
  void conv2d_input_grad(const Tensor& gy, const Tensor& w, const Conv2dParams& p, const Tensor& gx) override {
    cuda::conv2d_input_grad(gy, w, p, gx);
  }
  void conv2d_weight_grad(const Tensor& x, const Tensor& gy, const Conv2dParams& p, const Tensor& gw) override {
    cuda::conv2d_weight_grad(x, gy, p, gw);
  }
  void max_pool2d(const Tensor& x, const Pool2dParams& p, const Tensor& out, const Tensor& idx) override {
    cuda::max_pool2d(x, p, out, idx);
  }
  void max_pool2d_backward(const Tensor& gy, const Tensor& idx, const Tensor& gx) override {
    cuda::max_pool2d_backward(gy, idx, gx);
  }
  void avg_pool2d(const Tensor& x, const Pool2dParams& p, const Tensor& out) override {
    cuda::avg_pool2d(x, p, out);
  }
  void avg_pool2d_backward(const Tensor& gy, const Pool2dParams& p, const Tensor& gx) override {
    cuda::avg_pool2d_backward(gy, p, gx);
  }
  bool has_fused_batch_norm(const Tensor& x, double eps) const override { return cuda::batch_norm_supported(x, eps); }
  void batch_norm(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& rm, const Tensor& rv, bool training,
                  double momentum, double eps, const Tensor& out, const Tensor& save_mean,
                  const Tensor& save_invstd) override {
    cuda::batch_norm(x, w, b, rm, rv, training, momentum, eps, out, save_mean, save_invstd);
  }
  void batch_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& w, const Tensor& save_mean,
                           const Tensor& save_invstd, double eps, const Tensor& gx, const Tensor& gw,
                           const Tensor& gb) override {
    cuda::batch_norm_backward(gy, x, w, save_mean, save_invstd, eps, gx, gw, gb);
  }
  bool sgd_step(const Tensor& p, const Tensor& g, const Tensor& buf, const SgdStep& s) override {
    return cuda::sgd_step(p, g, buf, s);
  }
  bool adam_step(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const Tensor& vmax,
                 const AdamStep& a) override {
    return cuda::adam_step(p, g, m, v, vmax, a);
  }
  bool rmsprop_step(const Tensor& p, const Tensor& g, const Tensor& sq, const Tensor& gavg, const Tensor& buf,
                    const RmspropStep& r) override {
    return cuda::rmsprop_step(p, g, sq, gavg, buf, r);
  }
  bool adagrad_step(const Tensor& p, const Tensor& g, const Tensor& sum, const AdagradStep& a) override {
    return cuda::adagrad_step(p, g, sum, a);
  }
  bool adadelta_step(const Tensor& p, const Tensor& g, const Tensor& sq, const Tensor& acc,
                     const AdadeltaStep& a) override {
    return cuda::adadelta_step(p, g, sq, acc, a);
  }
};

// Registration at load time. No CUDA call happens here: a machine without a driver loads the
// library fine, and cuda::is_available() answers false when first asked.
struct Registrar {
  Registrar() {
    static auto* backend = new CudaBackend();  // never destroyed: tensors may outlive main()
    install_hooks();
    register_backend(DeviceType::cuda, backend);
  }
};
Registrar g_registrar;

}  // namespace
}  // namespace nabla::cuda
