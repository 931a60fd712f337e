#include "nn/rnn_utils.h"

#include <algorithm>
#include <numeric>

#include "core/ops.h"

namespace nabla::nn::utils::rnn {

namespace {

Tensor index_tensor(const std::vector<int64_t>& v, Device device) { return tensor(v, dtype(kInt64)).to(device); }

// The values of a 1-D integer tensor (any device), for the checks and index arithmetic here.
std::vector<int64_t> int64_values(const std::string& op, const char* what, const Tensor& t) {
  NABLA_CHECK(ValueError, t.defined(), op, ": ", what, " is undefined");
  NABLA_CHECK(ShapeError, t.dim() == 1, op, ": expected ", what, " to be 1-D, got shape ", t.sizes());
  NABLA_CHECK(DTypeError, is_integral(t.dtype()), op, ": expected ", what, " of an integer dtype, got ", t.dtype());
  Tensor c = t.detach().to(kCPU).to(kInt64).contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

Tensor pad_impl(const char* op, const std::vector<Tensor>& seqs, bool batch_first, double padding_value,
                const std::string& padding_side) {
  NABLA_CHECK(ValueError, padding_side == "right" || padding_side == "left", op, ": padding_side must be 'right' or ",
              "'left', got '", padding_side, "'");
  NABLA_CHECK(ValueError, !seqs.empty(), op, ": expected at least one sequence, got an empty list");
  int64_t max_len = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const Tensor& s = seqs[i];
    NABLA_CHECK(ValueError, s.defined(), op, ": sequence ", i, " is undefined");
    NABLA_CHECK(ShapeError, s.dim() >= 1, op, ": sequence ", i, " must have at least 1 dim (L, *), got shape ",
                s.sizes());
    const Tensor& s0 = seqs[0];
    NABLA_CHECK(ShapeError,
                s.dim() == s0.dim() && std::equal(s.sizes().begin() + 1, s.sizes().end(), s0.sizes().begin() + 1), op,
                ": sequence ", i, " has shape ", s.sizes(), " but sequence 0 has ", s0.sizes(),
                "; all must share the dims after the first");
    NABLA_CHECK(DTypeError, s.dtype() == s0.dtype(), op, ": sequence ", i, " has dtype ", s.dtype(),
                " but sequence 0 has ", s0.dtype());
    NABLA_CHECK(DeviceError, s.device() == s0.device(), op, ": sequence ", i, " is on ", s.device(),
                " but sequence 0 is on ", s0.device());
    max_len = std::max(max_len, s.size(0));
  }
  std::vector<Tensor> padded;  // each (max_len, *)
  for (const Tensor& s : seqs) {
    if (s.size(0) == max_len) {
      padded.push_back(s);
      continue;
    }
    Shape pad_shape = s.sizes();
    pad_shape[0] = max_len - s.size(0);
    Tensor pad = full(pad_shape, padding_value, dtype(s.dtype()).device(s.device()));
    padded.push_back(padding_side == "right" ? cat({s, pad}, 0) : cat({pad, s}, 0));
  }
  return stack(padded, batch_first ? 0 : 1);
}

PackedSequence pack_impl(const char* op, const Tensor& input, const std::vector<int64_t>& lengths, bool batch_first,
                         bool enforce_sorted) {
  NABLA_CHECK(ValueError, input.defined(), op, ": input is undefined");
  NABLA_CHECK(ShapeError, input.dim() >= 2, op, ": expected input of at least 2 dims (", batch_first ? "B, T" : "T, B",
              ", *), got shape ", input.sizes());
  const int64_t T = input.size(batch_first ? 1 : 0), B = input.size(batch_first ? 0 : 1);
  NABLA_CHECK(ShapeError, static_cast<int64_t>(lengths.size()) == B, op, ": expected one length per sequence, ", B,
              " for input ", input.sizes(), batch_first ? " (batch_first)" : "", ", got ", lengths.size(), " lengths ",
              IntArrayRef(lengths));
  NABLA_CHECK(ShapeError, B > 0, op, ": expected a batch of at least one sequence, got input ", input.sizes());
  for (size_t b = 0; b < lengths.size(); ++b) {
    NABLA_CHECK(ValueError, lengths[b] > 0, op, ": every length must be at least 1, got lengths ",
                IntArrayRef(lengths));
    NABLA_CHECK(ValueError, lengths[b] <= T, op, ": length ", lengths[b], " of sequence ", b, " exceeds the ", T,
                " time steps of input ", input.sizes(), batch_first ? " (batch_first)" : "");
    NABLA_CHECK(ValueError, !enforce_sorted || b == 0 || lengths[b] <= lengths[b - 1], op,
                ": lengths must be sorted in decreasing order when enforce_sorted is true, got ", IntArrayRef(lengths),
                "; pass enforce_sorted = false to pack unsorted sequences");
  }
  // order[j]: the batch position of the j-th longest sequence (stable among equal lengths).
  std::vector<int64_t> order(static_cast<size_t>(B));
  std::iota(order.begin(), order.end(), 0);
  if (!enforce_sorted)
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lengths[a] > lengths[b]; });
  const int64_t steps = lengths[order[0]];
  // One index_select of the rows of input flattened to (T * B, *) (batch_first: (B * T, *)) picks
  // step 0 of every sequence, in sorted order, then step 1 of those still running, ...
  std::vector<int64_t> batch_sizes, rows;
  for (int64_t t = 0; t < steps; ++t) {
    int64_t n = 0;
    for (int64_t j = 0; j < B && lengths[order[j]] > t; ++j, ++n)
      rows.push_back(batch_first ? order[j] * T + t : t * B + order[j]);
    batch_sizes.push_back(n);
  }
  PackedSequence out;
  out.data = input.flatten(0, 1).index_select(0, index_tensor(rows, input.device()));
  out.batch_sizes = tensor(batch_sizes, dtype(kInt64));
  if (!enforce_sorted) {
    std::vector<int64_t> inverse(static_cast<size_t>(B));
    for (int64_t j = 0; j < B; ++j) inverse[order[j]] = j;
    out.sorted_indices = index_tensor(order, input.device());
    out.unsorted_indices = index_tensor(inverse, input.device());
  }
  return out;
}

}  // namespace

std::vector<int64_t> PackedSequence::checked_batch_sizes(const std::string& op) const {
  NABLA_CHECK(ValueError, data.defined(), op, ": the packed sequence has no data");
  NABLA_CHECK(ShapeError, data.dim() >= 1, op, ": expected packed data of at least 1 dim, got shape ", data.sizes());
  NABLA_CHECK(DeviceError, !batch_sizes.defined() || batch_sizes.device() == Device(kCPU), op,
              ": batch_sizes must be on the CPU, got ", batch_sizes.device());
  NABLA_CHECK(DTypeError, !batch_sizes.defined() || batch_sizes.dtype() == kInt64, op,
              ": batch_sizes must be int64, got ", batch_sizes.dtype());
  std::vector<int64_t> bs = int64_values(op, "batch_sizes", batch_sizes);
  NABLA_CHECK(ValueError, !bs.empty(), op, ": batch_sizes is empty (a packed sequence has at least one step)");
  int64_t total = 0;
  for (size_t t = 0; t < bs.size(); ++t) {
    NABLA_CHECK(ValueError, bs[t] > 0 && (t == 0 || bs[t] <= bs[t - 1]), op,
                ": batch_sizes must be positive and non-increasing, got ", IntArrayRef(bs));
    total += bs[t];
  }
  NABLA_CHECK(ShapeError, total == data.size(0), op, ": batch_sizes ", IntArrayRef(bs), " sum to ", total,
              " but the packed data has ", data.size(0), " rows (shape ", data.sizes(), ")");
  return bs;
}

PackedSequence PackedSequence::to(Device device) const {
  auto move = [&](const Tensor& t) { return t.defined() ? t.to(device) : t; };
  return {move(data), batch_sizes, move(sorted_indices), move(unsorted_indices)};
}

PackedSequence PackedSequence::to(DType dt) const {
  return {data.to(dt), batch_sizes, sorted_indices, unsorted_indices};
}

Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first, double padding_value,
                    const std::string& padding_side) {
  return pad_impl("pad_sequence", sequences, batch_first, padding_value, padding_side);
}

PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths, bool batch_first, bool enforce_sorted) {
  return pack_impl("pack_padded_sequence", input, int64_values("pack_padded_sequence", "lengths", lengths), batch_first,
                   enforce_sorted);
}

PackedSequence pack_padded_sequence(const Tensor& input, const std::vector<int64_t>& lengths, bool batch_first,
                                    bool enforce_sorted) {
  return pack_impl("pack_padded_sequence", input, lengths, batch_first, enforce_sorted);
}

PaddedSequence pad_packed_sequence(const PackedSequence& sequence, bool batch_first, double padding_value,
                                   std::optional<int64_t> total_length) {
  const char* op = "pad_packed_sequence";
  const std::vector<int64_t> bs = sequence.checked_batch_sizes(op);
  const Tensor& data = sequence.data;
  const int64_t steps = static_cast<int64_t>(bs.size()), B = bs[0], S = data.size(0);
  const int64_t T = total_length.value_or(steps);
  NABLA_CHECK(ValueError, T >= steps, op, ": total_length ", T, " is smaller than the longest sequence's length ",
              steps);
  // Sorted position j's length, and where step t's rows start in data.
  std::vector<int64_t> sorted_len(static_cast<size_t>(B), 0), offset(static_cast<size_t>(steps), 0);
  for (int64_t t = 0; t < steps; ++t) {
    for (int64_t j = 0; j < bs[t]; ++j) ++sorted_len[j];
    if (t > 0) offset[t] = offset[t - 1] + bs[t - 1];
  }
  // unsorted[b]: the sorted position of the b-th sequence of the user's batch.
  std::vector<int64_t> unsorted(static_cast<size_t>(B));
  std::iota(unsorted.begin(), unsorted.end(), 0);
  if (sequence.unsorted_indices.defined()) {
    unsorted = int64_values(op, "unsorted_indices", sequence.unsorted_indices);
    NABLA_CHECK(ShapeError, static_cast<int64_t>(unsorted.size()) == B, op, ": unsorted_indices has ", unsorted.size(),
                " entries but the batch has ", B, " sequences");
    for (int64_t j : unsorted)
      NABLA_CHECK(IndexError, j >= 0 && j < B, op, ": unsorted_indices ", IntArrayRef(unsorted),
                  " out of range for a batch of ", B);
  }
  // padded (T, B, *) (batch_first: (B, T, *)) gathers the rows of [data; one row of padding_value]:
  // row S is the padding.
  std::vector<int64_t> rows(static_cast<size_t>(T * B)), lengths(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t j = unsorted[b];
    lengths[b] = sorted_len[j];
    for (int64_t t = 0; t < T; ++t) rows[batch_first ? b * T + t : t * B + b] = t < sorted_len[j] ? offset[t] + j : S;
  }
  Shape pad_shape = data.sizes(), shape = data.sizes();
  pad_shape[0] = 1;
  shape[0] = batch_first ? B : T;
  shape.insert(shape.begin() + 1, batch_first ? T : B);
  Tensor source = cat({data, full(pad_shape, padding_value, dtype(data.dtype()).device(data.device()))}, 0);
  Tensor padded = source.index_select(0, index_tensor(rows, data.device())).view(shape);
  return {padded, tensor(lengths, dtype(kInt64))};
}

PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted) {
  const char* op = "pack_sequence";
  Tensor padded = pad_impl(op, sequences, false, 0, "right");
  std::vector<int64_t> lengths;
  for (const Tensor& s : sequences) lengths.push_back(s.size(0));
  return pack_impl(op, padded, lengths, false, enforce_sorted);
}

}  // namespace nabla::nn::utils::rnn
