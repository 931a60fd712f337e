// The CPU Backend: forwards each kernel entry to the free functions of this ISA's build.
#include "core/cpu/kernels.h"

namespace nabla::cpu::NABLA_CPU_ISA {
namespace {

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }
  Allocator& allocator(Device) override { return cpu_allocator(); }

  void copy(const Tensor& src, const Tensor& dst, bool) override {
    check<DeviceError>(src.is_cpu() && dst.is_cpu(), "copy: the CPU backend cannot copy from ", src.device(),
                       " to ", dst.device());
    cpu::NABLA_CPU_ISA::copy(src, dst);
  }
  void fill(const Tensor& dst, Scalar v) override { cpu::NABLA_CPU_ISA::fill(dst, v); }
  void unary(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) override {
    cpu::NABLA_CPU_ISA::unary(op, x, out, p0, p1);
  }
  void binary(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, Scalar alpha) override {
    cpu::NABLA_CPU_ISA::binary(op, a, b, out, alpha);
  }
  void where(const Tensor& c, const Tensor& a, const Tensor& b, const Tensor& out) override {
    cpu::NABLA_CPU_ISA::where(c, a, b, out);
  }
  void reduce(ReduceOp op, const Tensor& x, IntArrayRef dims, const Tensor& out) override {
    cpu::NABLA_CPU_ISA::reduce(op, x, dims, out);
  }
  void arg_reduce(ReduceOp op, const Tensor& x, int64_t dim, const Tensor& v, const Tensor& i) override {
    cpu::NABLA_CPU_ISA::arg_reduce(op, x, dim, v, i);
  }
  void scan(ScanOp op, const Tensor& x, int64_t dim, const Tensor& out) override {
    cpu::NABLA_CPU_ISA::scan(op, x, dim, out);
  }
  void sort(const Tensor& x, int64_t dim, bool desc, const Tensor& v, const Tensor& i) override {
    cpu::NABLA_CPU_ISA::sort(x, dim, desc, v, i);
  }
  void topk(const Tensor& x, int64_t k, int64_t dim, bool largest, const Tensor& v, const Tensor& i) override {
    cpu::NABLA_CPU_ISA::topk(x, k, dim, largest, v, i);
  }
  void softmax(const Tensor& x, int64_t dim, bool log, const Tensor& out) override {
    cpu::NABLA_CPU_ISA::softmax(x, dim, log, out);
  }
  void softmax_backward(const Tensor& g, const Tensor& y, int64_t dim, bool log, const Tensor& out) override {
    cpu::NABLA_CPU_ISA::softmax_backward(g, y, dim, log, out);
  }
  void index_select(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) override {
    cpu::NABLA_CPU_ISA::index_select(x, dim, index, out);
  }
  void index_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) override {
    cpu::NABLA_CPU_ISA::index_add(out, dim, index, src);
  }
  void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) override {
    cpu::NABLA_CPU_ISA::gather(x, dim, index, out);
  }
  void scatter(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src, bool acc) override {
    cpu::NABLA_CPU_ISA::scatter(out, dim, index, src, acc);
  }
  Tensor nonzero(const Tensor& x) override { return cpu::NABLA_CPU_ISA::nonzero(x); }
  void random(RandomOp op, const Tensor& out, double p0, double p1, Generator& gen) override {
    cpu::NABLA_CPU_ISA::random(op, out, p0, p1, gen);
  }
  void random_int(const Tensor& out, int64_t low, int64_t high, Generator& gen) override {
    cpu::NABLA_CPU_ISA::random_int(out, low, high, gen);
  }
  void matmul(const Tensor& a, const Tensor& b, const Tensor& out, double alpha, double beta) override {
    cpu::NABLA_CPU_ISA::matmul(a, b, out, alpha, beta);
  }
  void conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p, const Tensor& out) override {
    cpu::NABLA_CPU_ISA::conv2d(x, w, b, p, out);
  }
  void conv2d_input_grad(const Tensor& gy, const Tensor& w, const Conv2dParams& p, const Tensor& gx) override {
    cpu::NABLA_CPU_ISA::conv2d_input_grad(gy, w, p, gx);
  }
  void conv2d_weight_grad(const Tensor& x, const Tensor& gy, const Conv2dParams& p, const Tensor& gw) override {
    cpu::NABLA_CPU_ISA::conv2d_weight_grad(x, gy, p, gw);
  }
  bool has_fused_batch_norm(const Tensor& x, double) const override { return cpu::NABLA_CPU_ISA::has_fused_batch_norm(x); }
  void batch_norm(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& rm, const Tensor& rv, bool training,
                  double momentum, double eps, const Tensor& out, const Tensor& sm, const Tensor& si) override {
    cpu::NABLA_CPU_ISA::batch_norm(x, w, b, rm, rv, training, momentum, eps, out, sm, si);
  }
  void batch_norm_backward(const Tensor& g, const Tensor& x, const Tensor& w, const Tensor& sm, const Tensor& si,
                           double eps, const Tensor& gx, const Tensor& gw, const Tensor& gb) override {
    cpu::NABLA_CPU_ISA::batch_norm_backward(g, x, w, sm, si, eps, gx, gw, gb);
  }
  bool sgd_step(const Tensor& p, const Tensor& g, const Tensor& buf, const SgdStep& s) override {
    return cpu::NABLA_CPU_ISA::sgd_step(p, g, buf, s);
  }
  bool adam_step(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const Tensor& vmax,
                 const AdamStep& a) override {
    return cpu::NABLA_CPU_ISA::adam_step(p, g, m, v, vmax, a);
  }
  bool rmsprop_step(const Tensor& p, const Tensor& g, const Tensor& sq, const Tensor& gavg, const Tensor& buf,
                    const RmspropStep& r) override {
    return cpu::NABLA_CPU_ISA::rmsprop_step(p, g, sq, gavg, buf, r);
  }
  bool adagrad_step(const Tensor& p, const Tensor& g, const Tensor& sum, const AdagradStep& a) override {
    return cpu::NABLA_CPU_ISA::adagrad_step(p, g, sum, a);
  }
  bool adadelta_step(const Tensor& p, const Tensor& g, const Tensor& sq, const Tensor& acc,
                     const AdadeltaStep& a) override {
    return cpu::NABLA_CPU_ISA::adadelta_step(p, g, sq, acc, a);
  }
  void max_pool2d(const Tensor& x, const Pool2dParams& p, const Tensor& out, const Tensor& idx) override {
    cpu::NABLA_CPU_ISA::max_pool2d(x, p, out, idx);
  }
  void max_pool2d_backward(const Tensor& gy, const Tensor& idx, const Tensor& gx) override {
    cpu::NABLA_CPU_ISA::max_pool2d_backward(gy, idx, gx);
  }
  void avg_pool2d(const Tensor& x, const Pool2dParams& p, const Tensor& out) override {
    cpu::NABLA_CPU_ISA::avg_pool2d(x, p, out);
  }
  void avg_pool2d_backward(const Tensor& gy, const Pool2dParams& p, const Tensor& gx) override {
    cpu::NABLA_CPU_ISA::avg_pool2d_backward(gy, p, gx);
  }
};

}  // namespace

Backend* make_backend() {
  static CpuBackend backend;
  return &backend;
}

}  // namespace nabla::cpu::NABLA_CPU_ISA
