// Variable-length sequences for the recurrent modules, as torch.nn.utils.rnn: pad a list of
// sequences into one tensor, pack a padded batch into a PackedSequence (what RNN, LSTM and GRU take
// to skip the padding), and unpack it again.
//
//   using namespace nabla::nn::utils::rnn;
//   Tensor padded = pad_sequence({a, b, c});                     // a (3, F), b (5, F), c (2, F) -> (5, 3, F)
//   PackedSequence packed = pack_padded_sequence(padded, {3, 5, 2}, false, /*enforce_sorted=*/false);
//   auto [out, h_n, c_n] = lstm->forward_with_state(packed);     // out: a PackedSequence
//   auto [y, lengths] = pad_packed_sequence(out);                // y (5, 3, D * H_out), lengths {3, 5, 2}
//
// The packed layout (PyTorch's): the sequences sorted by decreasing length, then time step by time
// step the elements of every sequence still running, so `data` holds batch_sizes[0] rows for step 0,
// batch_sizes[1] for step 1, ...; a sequence's state in a recurrent module is only updated while it
// runs. Every function is made of differentiable tensor ops (index_select, cat, ...), so gradients
// flow from the packed data back to the padded input and from the padded output back to the packed
// data. Shapes: * stands for any trailing feature dims, T for the longest length, B for the batch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "../core/tensor.h"

namespace nabla::nn::utils::rnn {

struct PackedSequence {
  Tensor data;         // (sum of lengths, *): the elements of step 0, then step 1, ...
  Tensor batch_sizes;  // (T) int64 on the CPU: how many sequences run at each step (non-increasing)
  // (B) int64 on data's device: sorted_indices[j] is the batch position of the j-th longest sequence,
  // unsorted_indices its inverse. Both undefined when the input was packed with enforce_sorted (it
  // was sorted already).
  Tensor sorted_indices, unsorted_indices;

  // The same sequence with data (and the indices) on another device or data in another dtype;
  // batch_sizes stays on the CPU.
  PackedSequence to(Device device) const;
  PackedSequence to(DType dtype) const;
  bool is_cuda() const { return data.is_cuda(); }
  // batch_sizes as a vector, checked against data (a 1-D int64 CPU tensor of positive, non-increasing
  // sizes that add up to data's rows); the errors name `op`.
  std::vector<int64_t> checked_batch_sizes(const std::string& op) const;
};

// (T, B, *) with batch_first false, (B, T, *) with it: the sequences (each (L_i, *), same trailing
// dims and dtype) padded with padding_value to the longest length, on padding_side "right" (after
// the elements) or "left".
Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first = false, double padding_value = 0,
                    const std::string& padding_side = "right");

// Packs input (T, B, *) (batch_first: (B, T, *)) whose b-th sequence has lengths[b] elements
// (1 <= lengths[b] <= T; lengths: a 1-D integer tensor, on any device, or a list). enforce_sorted:
// the lengths must be non-increasing (and the indices of the result stay undefined); otherwise the
// sequences are sorted here (stably) and the result records the permutation.
PackedSequence pack_padded_sequence(const Tensor& input, const Tensor& lengths, bool batch_first = false,
                                    bool enforce_sorted = true);
PackedSequence pack_padded_sequence(const Tensor& input, const std::vector<int64_t>& lengths, bool batch_first = false,
                                    bool enforce_sorted = true);

// What pad_packed_sequence returns: padded (T', B, *) (batch_first: (B, T', *)) with T' the longest
// length or total_length, and lengths (B) int64 on the CPU, both in the batch order of the
// sequences given to pack_padded_sequence / pack_sequence.
struct PaddedSequence {
  Tensor padded, lengths;
};

// Inverse of pack_padded_sequence: positions past a sequence's end hold padding_value; total_length
// (at least the longest length) pads the time dim further, as for a module that must give a fixed T.
PaddedSequence pad_packed_sequence(const PackedSequence& sequence, bool batch_first = false, double padding_value = 0,
                                   std::optional<int64_t> total_length = std::nullopt);

// pack_padded_sequence(pad_sequence(sequences), their lengths, false, enforce_sorted).
PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted = true);

}  // namespace nabla::nn::utils::rnn
