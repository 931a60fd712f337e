// Variable-length sequences (nn/rnn_utils.h, torch.nn.utils.rnn) and the recurrent modules on packed
// input: exact packing layouts and indices, errors, values against libtorch 1.13, every sequence
// against running it alone, and float64 gradcheck through pack -> module -> pad.
#include <gtest/gtest.h>

#include <type_traits>
#include <vector>

#include "autograd/gradcheck.h"
#include "nabla.h"
#include "tests/common/value_helpers.h"

using namespace nabla;
using namespace nabla::testing;
using namespace nabla::nn::utils::rnn;

namespace {

using Vec = std::vector<double>;
using Ints = std::vector<int64_t>;

// x[t][b] = 3 t + b + 1: a (T = 3, B = 3) batch whose values name their position.
Tensor position_batch() { return f64({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}); }

// The three sequences of the pad/pack tests: a (1, 2), b (3, 2), c (2, 2).
std::vector<Tensor> three_sequences() {
  return {f64({1, 2}, {1, 2}), f64({3, 4, 5, 6, 7, 8}, {3, 2}), f64({9, 10, 11, 12}, {2, 2})};
}

}  // namespace

// ---- (1) pad / pack / unpack on known inputs --------------------------------------------------------

TEST(NnRNNPacked, PadSequence) {
  const double p = -1;
  std::vector<Tensor> s = three_sequences();
  // (T, B, *): time step by time step
  EXPECT_TRUE(tensor_is(pad_sequence(s, false, p), {3, 3, 2},
                        {1, 2, 3, 4, 9, 10,   //
                         p, p, 5, 6, 11, 12,  //
                         p, p, 7, 8, p, p},
                        0, 0));
  // (B, T, *): sequence by sequence
  EXPECT_TRUE(tensor_is(pad_sequence(s, true, p), {3, 3, 2},
                        {1, 2, p, p, p, p,  //
                         3, 4, 5, 6, 7, 8,  //
                         9, 10, 11, 12, p, p},
                        0, 0));
  // padding on the left
  EXPECT_TRUE(tensor_is(pad_sequence(s, true, p, "left"), {3, 3, 2},
                        {p, p, p, p, 1, 2,  //
                         3, 4, 5, 6, 7, 8,  //
                         p, p, 9, 10, 11, 12},
                        0, 0));
  // 1-D sequences, the default padding 0, and an empty sequence
  EXPECT_TRUE(tensor_is(pad_sequence({f64({1, 2, 3}, {3}), f64({}, {0}), f64({4}, {1})}), {3, 3},
                        {1, 0, 4, 2, 0, 0, 3, 0, 0}, 0, 0));
  // integer sequences keep their dtype
  Tensor ints = pad_sequence({tensor(Ints{1, 2}), tensor(Ints{3})}, true, 7);
  EXPECT_EQ(ints.dtype(), kInt64);
  EXPECT_EQ(int_values(ints), (Ints{1, 2, 3, 7}));
}

TEST(NnRNNPacked, PackPaddedSequenceSortedAndUnsorted) {
  Tensor x = position_batch();  // columns: sequences
  // sorted lengths: step 0 of all three, step 1 of the first two, step 2 of the first
  PackedSequence s = pack_padded_sequence(x, Ints{3, 2, 1});
  EXPECT_TRUE(tensor_is(s.data, {6}, {1, 2, 3, 4, 5, 7}, 0, 0));
  EXPECT_EQ(s.batch_sizes.dtype(), kInt64);
  EXPECT_EQ(s.batch_sizes.device(), Device(kCPU));
  EXPECT_EQ(int_values(s.batch_sizes), (Ints{3, 2, 1}));
  EXPECT_FALSE(s.sorted_indices.defined());
  EXPECT_FALSE(s.unsorted_indices.defined());

  // unsorted lengths {1, 3, 2}: the sorted order is sequences 1, 2, 0
  PackedSequence u = pack_padded_sequence(x, Ints{1, 3, 2}, false, false);
  EXPECT_TRUE(tensor_is(u.data, {6}, {2, 3, 1, 5, 6, 8}, 0, 0));
  EXPECT_EQ(int_values(u.batch_sizes), (Ints{3, 2, 1}));
  EXPECT_EQ(u.sorted_indices.dtype(), kInt64);
  EXPECT_EQ(int_values(u.sorted_indices), (Ints{1, 2, 0}));
  EXPECT_EQ(int_values(u.unsorted_indices), (Ints{2, 0, 1}));  // sequence b sits at sorted position unsorted[b]

  // batch_first takes (B, T, *); the lengths as an int32 tensor
  PackedSequence bf = pack_padded_sequence(x.t().contiguous(), tensor(std::vector<int32_t>{1, 3, 2}), true, false);
  EXPECT_TRUE(tensor_is(bf.data, {6}, {2, 3, 1, 5, 6, 8}, 0, 0));
  EXPECT_EQ(int_values(bf.batch_sizes), (Ints{3, 2, 1}));
  EXPECT_EQ(int_values(bf.sorted_indices), (Ints{1, 2, 0}));

  // the lengths as a braced list
  EXPECT_EQ(int_values(pack_padded_sequence(x, {1, 3, 2}, false, false).sorted_indices), (Ints{1, 2, 0}));

  // equal lengths keep their order (stable); trailing feature dims travel along
  PackedSequence eq = pack_padded_sequence(f64({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}), Ints{1, 2}, false, false);
  EXPECT_TRUE(tensor_is(eq.data, {3, 2}, {3, 4, 1, 2, 7, 8}, 0, 0));
  EXPECT_EQ(int_values(eq.sorted_indices), (Ints{1, 0}));
  PackedSequence tie = pack_padded_sequence(position_batch(), Ints{2, 2, 2}, false, false);
  EXPECT_EQ(int_values(tie.sorted_indices), (Ints{0, 1, 2}));
  EXPECT_TRUE(tensor_is(tie.data, {6}, {1, 2, 3, 4, 5, 6}, 0, 0));
}

TEST(NnRNNPacked, PadPackedSequenceRestoresTheUsersOrder) {
  const double p = -1;
  Tensor x = position_batch();
  PackedSequence u = pack_padded_sequence(x, Ints{1, 3, 2}, false, false);
  auto [padded, lengths] = pad_packed_sequence(u, false, p);
  EXPECT_TRUE(tensor_is(padded, {3, 3}, {1, 2, 3, p, 5, 6, p, 8, p}, 0, 0));
  EXPECT_EQ(lengths.dtype(), kInt64);
  EXPECT_EQ(lengths.device(), Device(kCPU));
  EXPECT_EQ(int_values(lengths), (Ints{1, 3, 2}));
  // batch_first and total_length
  auto [bf, bf_len] = pad_packed_sequence(u, true, p, 4);
  EXPECT_TRUE(tensor_is(bf, {3, 4}, {1, p, p, p, 2, 5, 8, p, 3, 6, p, p}, 0, 0));
  EXPECT_EQ(int_values(bf_len), (Ints{1, 3, 2}));
  auto [tl, tl_len] = pad_packed_sequence(u, false, 0, 5);
  EXPECT_TRUE(tensor_is(tl, {5, 3}, {1, 2, 3, 0, 5, 6, 0, 8, 0, 0, 0, 0, 0, 0, 0}, 0, 0));
  // a sorted pack: no indices, the order as packed
  auto [sp, sl] = pad_packed_sequence(pack_padded_sequence(x, Ints{3, 2, 1}), false, 0);
  EXPECT_TRUE(tensor_is(sp, {3, 3}, {1, 2, 3, 4, 5, 0, 7, 0, 0}, 0, 0));
  EXPECT_EQ(int_values(sl), (Ints{3, 2, 1}));
}

TEST(NnRNNPacked, PackSequenceAndRoundTrips) {
  std::vector<Tensor> s = three_sequences();
  PackedSequence u = pack_sequence(s, false);
  EXPECT_TRUE(tensor_is(u.data, {6, 2}, {3, 4, 9, 10, 1, 2, 5, 6, 11, 12, 7, 8}, 0, 0));
  EXPECT_EQ(int_values(u.batch_sizes), (Ints{3, 2, 1}));
  EXPECT_EQ(int_values(u.sorted_indices), (Ints{1, 2, 0}));
  EXPECT_EQ(int_values(u.unsorted_indices), (Ints{2, 0, 1}));
  // sorted input and enforce_sorted: the sequences in the given order
  PackedSequence sorted = pack_sequence({s[1], s[2], s[0]});
  EXPECT_TRUE(tensor_is(sorted.data, {6, 2}, {3, 4, 9, 10, 1, 2, 5, 6, 11, 12, 7, 8}, 0, 0));
  EXPECT_FALSE(sorted.sorted_indices.defined());

  // pack -> pad gives pad_sequence's result back, both layouts, with the padding value
  for (bool batch_first : {false, true}) {
    auto [padded, lengths] = pad_packed_sequence(u, batch_first, -2.5);
    EXPECT_TRUE(tensor_near(padded, pad_sequence(s, batch_first, -2.5), 0, 0)) << batch_first;
    EXPECT_EQ(int_values(lengths), (Ints{1, 3, 2}));
  }
  // padded -> pack -> pad gives the input back where it is not padding
  Tensor x = lcg_tensor({4, 5, 3}, 7);  // (B, T, F)
  const Ints len = {2, 5, 1, 4};
  auto [y, y_len] = pad_packed_sequence(pack_padded_sequence(x, len, true, false), true, 0);
  for (int64_t b = 0; b < 4; ++b) {
    EXPECT_TRUE(tensor_near(y[b].narrow(0, 0, len[b]), x[b].narrow(0, 0, len[b]), 0, 0)) << b;
    if (len[b] < 5)
      EXPECT_TRUE(tensor_near(y[b].narrow(0, len[b], 5 - len[b]), zeros({5 - len[b], 3}, kFloat64), 0, 0));
  }
  EXPECT_EQ(int_values(y_len), len);

  // PackedSequence::to converts the data and keeps batch_sizes on the CPU
  PackedSequence f = u.to(kFloat32);
  EXPECT_EQ(f.data.dtype(), kFloat32);
  EXPECT_TRUE(tensor_near(f.data, u.data, 0, 0));
  EXPECT_EQ(int_values(u.to(Device(kCPU)).sorted_indices), (Ints{1, 2, 0}));
  EXPECT_FALSE(u.is_cuda());
}

TEST(NnRNNPacked, GradientsFlowBackToThePaddedInput) {
  // d/dx of sum(w * pad_packed(pack_padded(x))): w where x is a sequence element, 0 on the padding.
  Tensor x = lcg_tensor({3, 3, 2}, 5).requires_grad_(true);  // (T, B, F)
  Tensor w = lcg_tensor({3, 3, 2}, 6);
  auto [y, len] = pad_packed_sequence(pack_padded_sequence(x, Ints{1, 3, 2}, false, false), false, 9);
  (y * w).sum().backward();
  Tensor keep = f64({1, 1, 1, 0, 1, 1, 0, 1, 0}, {3, 3, 1});
  EXPECT_TRUE(tensor_near(x.grad(), w * keep, 0, 0));
  // pad_sequence passes each sequence's gradient back
  std::vector<Tensor> s = three_sequences();
  for (Tensor& t : s) t.requires_grad_(true);
  (pad_sequence(s, true) * arange(18, dtype(kFloat64)).view({3, 3, 2})).sum().backward();
  EXPECT_TRUE(tensor_is(s[0].grad(), {1, 2}, {0, 1}, 0, 0));
  EXPECT_TRUE(tensor_is(s[1].grad(), {3, 2}, {6, 7, 8, 9, 10, 11}, 0, 0));
  EXPECT_TRUE(tensor_is(s[2].grad(), {2, 2}, {12, 13, 14, 15}, 0, 0));
  // gradcheck of pack -> pad with a total_length
  autograd::gradcheck(
      [](const std::vector<Tensor>& in) {
        PackedSequence p = pack_padded_sequence(in[0], Ints{2, 3, 1}, true, false);
        return std::vector<Tensor>{p.data, pad_packed_sequence(p, false, 0.5, 4).padded};
      },
      {lcg_tensor({3, 3, 2}, 8).requires_grad_(true)});
}

// ---- (2) errors -------------------------------------------------------------------------------------

TEST(NnRNNPacked, ErrorsNameTheOpAndWhatWasPassed) {
  Tensor x = position_batch();
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        pack_padded_sequence(x, Ints{3, 1, 2});
      },
      {"pack_padded_sequence: lengths must be sorted in decreasing order when "
       "enforce_sorted is true, got [3, 1, 2]",
       "pass enforce_sorted = false"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        pack_padded_sequence(x, Ints{3, 0, 1}, false, false);
      },
      {"pack_padded_sequence: every length must be at least 1, got lengths [3, 0, 1]"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        pack_padded_sequence(x, Ints{4, 2, 1});
      },
      {"pack_padded_sequence: length 4 of sequence 0 exceeds the 3 time steps of input [3, 3]"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        pack_padded_sequence(randn({2, 3, 4}), Ints{1, 4}, true, false);
      },
      {"pack_padded_sequence: length 4 of sequence 1 exceeds the 3 time steps of input [2, 3, 4] (batch_first)"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        pack_padded_sequence(x, Ints{3, 2});
      },
      {"pack_padded_sequence: expected one length per sequence, 3 for input [3, 3], got 2 lengths [3, 2]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        pack_padded_sequence(randn({4, 5, 2}), Ints{3, 2, 1}, true);
      },
      {"pack_padded_sequence: expected one length per sequence, 4", "(batch_first)"}));
  EXPECT_TRUE(throws_with<DTypeError>(
      [&] {
        pack_padded_sequence(x, f64({3, 2, 1}, {3}));
      },
      {"pack_padded_sequence: expected lengths of an integer dtype, got float64"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        pack_padded_sequence(x, tensor(Ints{3, 2, 1, 1}, IntArrayRef{2, 2}));
      },
      {"pack_padded_sequence: expected lengths to be 1-D, got shape [2, 2]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        pack_padded_sequence(f64({1, 2}, {2}), Ints{2});
      },
      {"pack_padded_sequence: expected input of at least 2 dims (T, B, *), got shape [2]"}));
  EXPECT_TRUE(throws_with<ValueError>(
      [&] {
        pack_sequence({f64({1}, {1}), f64({1, 2}, {2})});
      },
      {"pack_sequence: lengths must be sorted in decreasing order", "[1, 2]", "enforce_sorted = false"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { pack_sequence({}); },
                                      {"pack_sequence: expected at least one sequence, got an empty list"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { pack_sequence({f64({}, {0})}); },
                                      {"pack_sequence: every length must be at least 1"}));
  // pad_sequence
  EXPECT_TRUE(throws_with<ValueError>([&] { pad_sequence({}); },
                                      {"pad_sequence: expected at least one sequence, got an empty list"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        pad_sequence({randn({2, 3}), randn({2, 4})});
      },
      {"pad_sequence: sequence 1 has shape [2, 4] but sequence 0 has [2, 3]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        pad_sequence({randn({2, 3}), randn({2})});
      },
      {"pad_sequence: sequence 1 has shape [2]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        pad_sequence({randn({2}), scalar_tensor(1.0)});
      },
      {"pad_sequence: sequence 1 must have at least 1 dim (L, *), got shape []"}));
  EXPECT_TRUE(throws_with<DTypeError>(
      [&] {
        pad_sequence({randn({2}), randn({2}, kFloat64)});
      },
      {"pad_sequence: sequence 1 has dtype float64 but sequence 0 has float32"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { pad_sequence({randn({2})}, false, 0, "middle"); },
                                      {"pad_sequence: padding_side must be 'right' or 'left', got 'middle'"}));
  // pad_packed_sequence
  PackedSequence u = pack_padded_sequence(x, Ints{1, 3, 2}, false, false);
  EXPECT_TRUE(
      throws_with<ValueError>([&] { pad_packed_sequence(u, false, 0, 2); },
                              {"pad_packed_sequence: total_length 2 is smaller than the longest sequence's length 3"}));
  PackedSequence bad = u;
  bad.batch_sizes = tensor(Ints{3, 2});
  EXPECT_TRUE(
      throws_with<ShapeError>([&] { pad_packed_sequence(bad); },
                              {"pad_packed_sequence: batch_sizes [3, 2] sum to 5 but the packed data has 6 rows"}));
  bad.batch_sizes = tensor(Ints{2, 3, 1});
  EXPECT_TRUE(
      throws_with<ValueError>([&] { pad_packed_sequence(bad); },
                              {"pad_packed_sequence: batch_sizes must be positive and non-increasing, got [2, 3, 1]"}));
  bad.batch_sizes = f64({3, 2, 1}, {3});
  EXPECT_TRUE(throws_with<DTypeError>([&] { pad_packed_sequence(bad); },
                                      {"pad_packed_sequence: batch_sizes must be int64, got float64"}));
  EXPECT_TRUE(throws_with<ValueError>([&] { pad_packed_sequence(PackedSequence{}); },
                                      {"pad_packed_sequence: the packed sequence has no data"}));

  // the modules
  nn::LSTM lstm(3, 4, {.num_layers = 2});
  PackedSequence p3 = pack_padded_sequence(randn({5, 3, 3}), Ints{3, 5, 2}, false, false);
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        lstm.forward_with_state(pack_sequence({randn({2, 2})}));
      },
      {"LSTM: expected packed data of shape (sum of lengths, 3), got [2, 2]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        lstm.forward_with_state(p3, {randn({2, 2, 4}), Tensor()});
      },
      {"LSTM: expected h0 of shape [2, 3, 4], got [2, 2, 4]"}));
  EXPECT_TRUE(throws_with<ShapeError>(
      [&] {
        lstm.forward_with_state(p3, {Tensor(), randn({2, 3, 5})});
      },
      {"LSTM: expected c0 of shape [2, 3, 4], got [2, 3, 5]"}));
  nn::GRU gru(3, 4);
  PackedSequence broken = p3;
  broken.batch_sizes = tensor(Ints{3, 3, 2, 1});
  EXPECT_TRUE(throws_with<ShapeError>([&] { gru.forward_with_state(broken); },
                                      {"GRU: batch_sizes [3, 3, 2, 1] sum to 9 but the packed data has 10 rows"}));
}

// ---- (3) against libtorch 1.13 ----------------------------------------------------------------------
// A throwaway program built against libtorch 1.13 (torch::nn::LSTM/GRU/RNN in float64) filled every
// parameter with value_helpers.h's filled(its shape, its name) (fill_params here), the padded input x
// with filled(shape, "x"), h0 with filled(shape, "h0") and c0 with filled(shape, "c0"), packed x with
// torch::nn::utils::rnn::pack_padded_sequence(x, lengths {3, 5, 2}, batch_first, enforce_sorted=false),
// ran forward_with_packed_input and printed the packed output's data, h_n and c_n with printf("%.15g").

namespace {

const Ints kLengths = {3, 5, 2};

// Each sequence alone, unpadded, through the module from its own slice of h0/c0 must give the
// sequence's columns of the padded packed output and its h_n/c_n. x: (T, B, F) (batch_first: (B, T, F)).
template <class M, class State>
void expect_each_sequence_alone(M& m, const Tensor& x, bool batch_first, const State& state, const Tensor& out_padded,
                                const Tensor& h_n, const Tensor& c_n) {
  for (int64_t b = 0; b < static_cast<int64_t>(kLengths.size()); ++b) {
    const int64_t len = kLengths[b];
    Tensor xb = (batch_first ? x[b] : x.select(1, b)).narrow(0, 0, len);  // (len, F): unbatched
    Tensor want_out, want_h, want_c;
    if constexpr (std::is_same_v<State, nn::LSTMState>) {
      nn::LSTMState sb{state.h.defined() ? state.h.select(1, b) : Tensor(),
                       state.c.defined() ? state.c.select(1, b) : Tensor()};
      auto r = m.forward_with_state(xb, sb);
      want_out = r.output, want_h = r.h_n, want_c = r.c_n;
    } else {
      auto r = m.forward_with_state(xb, state.defined() ? state.select(1, b) : Tensor());
      want_out = r.output, want_h = r.h_n;
    }
    Tensor got_out = out_padded.select(1, b);  // (T, D * H_out)
    EXPECT_TRUE(tensor_near(got_out.narrow(0, 0, len), want_out, 1e-14, 1e-12)) << "sequence " << b;
    const int64_t T = got_out.size(0);
    if (len < T)
      EXPECT_TRUE(tensor_near(got_out.narrow(0, len, T - len), zeros({T - len, got_out.size(1)}, kFloat64), 0, 0));
    EXPECT_TRUE(tensor_near(h_n.select(1, b), want_h, 1e-14, 1e-12)) << "sequence " << b;
    if (c_n.defined()) EXPECT_TRUE(tensor_near(c_n.select(1, b), want_c, 1e-14, 1e-12)) << "sequence " << b;
  }
}

}  // namespace

TEST(NnRNNPacked, LSTMTwoLayersBidirectionalMatchesLibtorch) {
  // LSTM(3, 3, num_layers=2, bidirectional=True); x (5, 3, 3), h0 and c0 (4, 3, 3)
  nn::LSTM m(3, 3, {.num_layers = 2, .bidirectional = true});
  fill_params(m);
  Tensor x = filled({5, 3, 3}, "x");
  nn::LSTMState state{filled({4, 3, 3}, "h0"), filled({4, 3, 3}, "c0")};
  PackedSequence packed = pack_padded_sequence(x, kLengths, false, false);
  auto [out, h_n, c_n] = m.forward_with_state(packed, state);
  EXPECT_EQ(int_values(out.batch_sizes), (Ints{3, 3, 2, 1, 1}));
  EXPECT_EQ(int_values(out.sorted_indices), (Ints{1, 0, 2}));
  EXPECT_EQ(int_values(out.unsorted_indices), (Ints{1, 0, 2}));
  // clang-format off
  EXPECT_TRUE(tensor_is(out.data, {10, 6}, {
      0.0793185125378906, 0.0954355778690171, 0.14685086147956, -0.235321329890431, -0.174873499659597, -0.208603466999866,
      0.0536946339436894, -0.0181031535817552, 0.0966885444444699, -0.221783545064262, -0.164338599027957, -0.202573594034922,
      0.208156516503372, 0.198811826069297, 0.138123124322997, -0.207966613054687, -0.178213278510797, -0.212964334049744,
      0.181156662214039, 0.0749506702868327, 0.244259527298541, -0.254541873641306, -0.162109666815727, -0.205743211929136,
      0.166526891163084, 0.036806246020614, 0.145764431294926, -0.173302977259876, -0.169067787634325, -0.217059058540869,
      0.229462474220442, 0.143676201898737, 0.220568712253336, -0.20633480129937, -0.123508068017997, -0.163274976598621,
      0.217980664835805, 0.126398863881136, 0.207405876579129, -0.21492199482363, -0.171905479409405, -0.212609646523899,
      0.234862380030698, 0.0745795754005984, 0.173736255198809, -0.0823076329776171, -0.13493792585642, -0.188321443081246,
      0.258327163840024, 0.106685709589187, 0.251946909243646, -0.220469478105396, -0.163934204231922, -0.211691760951109,
      0.264252815623487, 0.165498050893978, 0.19812662381935, -0.135144870908194, -0.0901506789910343, -0.143109556710506
  }, 1e-13, 1e-13));
  EXPECT_TRUE(tensor_is(h_n, {4, 3, 3}, {
      0.0151529837521944, 0.0186530601082592, 0.00885378816211805, 0.128270136289597, 0.107418109405639, 0.0251613499293128,
      -0.0275431300679606, 0.0304794842643703, 0.130874156414107, -0.201810427847581, -0.242506973626252, -0.260407435234567,
      -0.189428192847719, -0.0751309604381071, -0.136416903664847, -0.173735861347177, -0.0405560911098931, -0.0846025967440348,
      0.234862380030698, 0.0745795754005984, 0.173736255198809, 0.264252815623487, 0.165498050893978, 0.19812662381935,
      0.229462474220442, 0.143676201898737, 0.220568712253336, -0.221783545064262, -0.164338599027957, -0.202573594034922,
      -0.235321329890431, -0.174873499659597, -0.208603466999866, -0.207966613054687, -0.178213278510797, -0.212964334049744
  }, 1e-13, 1e-13));
  EXPECT_TRUE(tensor_is(c_n, {4, 3, 3}, {
      0.0277219773320217, 0.0343279259790772, 0.0173955968349706, 0.360873907055128, 0.234750428537557, 0.0408173426379638,
      -0.0386609480962014, 0.0513667780453871, 0.362313994085027, -0.812807884999995, -0.761118725213584, -0.642730030114487,
      -0.953657907353838, -0.378269906572387, -0.431277569893295, -0.842655199148774, -0.235484210754058, -0.291735856941784,
      0.56679392042723, 0.211557056614504, 0.609784693887928, 0.609630545152255, 0.435504910903483, 0.969682725492383,
      0.529413815214683, 0.423680564682659, 0.835058063593397, -0.665642933944931, -0.752854044085459, -0.520540735291542,
      -0.915870097227644, -0.723061076071644, -0.5244495143905, -0.864695483828331, -0.675161366690829, -0.491909841274968
  }, 1e-13, 1e-13));
  // clang-format on
  expect_each_sequence_alone(m, x, false, state, pad_packed_sequence(out).padded, h_n, c_n);
}

TEST(NnRNNPacked, LSTMWithProjectionMatchesLibtorch) {
  // LSTM(3, 4, proj_size=2, bidirectional=True, batch_first=True); x (3, 5, 3), no initial state
  nn::LSTM m(3, 4, {.batch_first = true, .bidirectional = true, .proj_size = 2});
  fill_params(m);
  Tensor x = filled({3, 5, 3}, "x");
  auto [out, h_n, c_n] = m.forward_with_state(pack_padded_sequence(x, kLengths, true, false));
  // clang-format off
  EXPECT_TRUE(tensor_is(out.data, {10, 4}, {
      -0.0740393981144273, -0.0151758251562914, 0.256689587829563, 0.310716248726816, -0.063505302989601, 0.0148553015723689,
      0.358923096853493, 0.373864551634937, -0.0723236699538705, -0.022372539238055, 0.109165783949014, 0.250421881709962,
      -0.0879078609102522, 0.0257249197242076, 0.437083033581514, 0.413413258751908, 0.0181088253909043, 0.0213021816330027,
      0.480989256045059, 0.447156803609049, -0.11523952208249, -0.00252076753339381, 0.0812453905495809, 0.215278598154042,
      0.0494388259704698, 0.015808908515946, 0.526345038392358, 0.456554112993241, 0.138627728316444, -0.0045295470067661,
      0.405484215849687, 0.41379646427574, 0.128866971301758, -0.00399994995689502, 0.461148036435273, 0.446147004640599,
      0.0366495578178087, -0.00323536622401463, 0.227285301008502, 0.294765673307616
  }, 1e-13, 1e-13));
  EXPECT_TRUE(tensor_is(h_n, {2, 3, 2}, {
      0.138627728316444, -0.0045295470067661, 0.0366495578178087, -0.00323536622401463, -0.11523952208249, -0.00252076753339381,
      0.358923096853493, 0.373864551634937, 0.256689587829563, 0.310716248726816, 0.109165783949014, 0.250421881709962
  }, 1e-13, 1e-13));
  EXPECT_TRUE(tensor_is(c_n, {2, 3, 4}, {
      -0.197059318404719, -0.370347699268183, -0.0332382559599595, 0.218381795625998, -0.0163998535156037, -0.143937902790047,
      -0.0311234974256989, 0.0699498467942044, 0.210643666151163, 0.319120555532525, 0.210089831322623, -0.26206078667432,
      -0.702991503045583, -0.665690780570363, -0.48578942166896, -0.292040683335132, -0.908891515468149, -0.624069076921342,
      -0.284399872915491, -0.191210962786833, -1.01347489829377, -0.475144637700037, -0.0260568332161532, -0.00629392662447953
  }, 1e-13, 1e-13));
  // clang-format on
  // batch_first is the packing's business: the module's padded output comes back (B, T, D * H_out)
  auto [padded, lengths] = pad_packed_sequence(out, true);
  EXPECT_EQ(shape_of(padded), (Ints{3, 5, 4}));
  EXPECT_EQ(int_values(lengths), kLengths);
  expect_each_sequence_alone(m, x, true, nn::LSTMState{}, padded.transpose(0, 1), h_n, c_n);
}

TEST(NnRNNPacked, GRUAndRNNMatchLibtorch) {
  {  // GRU(3, 3, num_layers=2, bidirectional=True); x (5, 3, 3), h0 (4, 3, 3)
    nn::GRU m(3, 3, {.num_layers = 2, .bidirectional = true});
    fill_params(m);
    Tensor x = filled({5, 3, 3}, "x"), h0 = filled({4, 3, 3}, "h0");
    auto [out, h_n] = m.forward_with_state(pack_padded_sequence(x, kLengths, false, false), h0);
    // clang-format off
    EXPECT_TRUE(tensor_is(out.data, {10, 6}, {
      0.265875980771967, 0.369990415533984, 0.526790565229163, -0.430593125215145, -0.663890619387818, -0.239526513821148,
      -0.0177074841264263, -0.143620526370483, 0.264045645808226, -0.0899781251303318, -0.716440650782439, -0.563351905655451,
      0.349648643824435, 0.409174878532315, 0.304043207521681, -0.51759675870746, -0.611737465422817, -0.13172664950825,
      0.237538588382569, 0.224948408596527, 0.576832024792966, -0.394449234092452, -0.725388190566864, -0.302736278508758,
      0.0899056868052123, -0.0695734584570873, 0.329482725967682, -0.152964026238588, -0.704265403150574, -0.421237485488654,
      0.278912247143827, 0.229398945367184, 0.393868671133984, -0.370287594914557, -0.751247639987298, -0.259914751338742,
      0.202652906685076, 0.230980616329214, 0.565270854395586, -0.464460053239847, -0.63041507055981, -0.234485610648565,
      0.143010982933841, -0.01529684817821, 0.382693772319814, -0.085181444255822, -0.600752101139079, -0.436996076758749,
      0.187685335832884, 0.1387362692485, 0.603095047158021, -0.40181315457615, -0.71795324211134, -0.29736605057519,
      0.150752689391983, 0.185031148801223, 0.577799753890662, -0.469542363882718, -0.59131380253407, -0.267183984630014
  }, 1e-13, 1e-13));
    EXPECT_TRUE(tensor_is(h_n, {4, 3, 3}, {
      0.141792580948431, 0.109692502885142, 0.0793871369030098, 0.431240007156991, 0.269980598933616, 0.076058298774587,
      0.266741283976985, 0.220710591651541, 0.334836549272181, -0.48822743769623, -0.536339733331121, -0.582367434425622,
      -0.589571580907756, -0.0702795611225986, -0.209187969985418, -0.569164026663173, 0.192916629277581, 0.0867437086011082,
      0.143010982933841, -0.01529684817821, 0.382693772319814, 0.150752689391983, 0.185031148801223, 0.577799753890662,
      0.278912247143827, 0.229398945367184, 0.393868671133984, -0.0899781251303318, -0.716440650782439, -0.563351905655451,
      -0.430593125215145, -0.663890619387818, -0.239526513821148, -0.51759675870746, -0.611737465422817, -0.13172664950825
  }, 1e-13, 1e-13));
    // clang-format on
    expect_each_sequence_alone(m, x, false, h0, pad_packed_sequence(out).padded, h_n, Tensor());
  }
  {  // RNN(3, 4, num_layers=2) tanh; x (5, 3, 3), h0 (2, 3, 4)
    nn::RNN m(3, 4, {.num_layers = 2});
    fill_params(m);
    Tensor x = filled({5, 3, 3}, "x"), h0 = filled({2, 3, 4}, "h0");
    auto [out, h_n] = m.forward_with_state(pack_padded_sequence(x, kLengths, false, false), h0);
    // clang-format off
    EXPECT_TRUE(tensor_is(out.data, {10, 4}, {
      0.418113323055854, 0.690456919867928, 0.374851492742594, 0.39430074494853, 0.757871553092704, 0.606303855208212,
      -0.176309167069656, 0.429175428966986, -0.564742697360924, 0.0948557822996706, 0.872284087317231, 0.872288752110064,
      -0.585194578454785, 0.3627405097688, 0.890590588361914, 0.79043369366424, -0.50013985123244, -0.171887944139607,
      0.834731013617735, 0.919551777281103, -0.403651808047412, 0.78625407367079, 0.863269421991686, 0.353596793240276,
      -0.635743027148042, 0.159334215188284, 0.898748033578872, 0.861552408061362, -0.338836606804012, 0.655101755729511,
      0.827613678819582, 0.554007790131185, -0.4070084397238, 0.799088008140787, 0.865865322308329, 0.324682612206041,
      -0.67229630438171, -0.152451502142203, 0.900070059153795, 0.923887407253978
  }, 1e-13, 1e-13));
    EXPECT_TRUE(tensor_is(h_n, {2, 3, 4}, {
      -0.0281106136330988, -0.327181983289829, -0.226183795828106, 0.161171339168102, 0.581746902499611, 0.733446822965685,
      -0.252421676520453, -0.830141566423198, -0.571472372534668, -0.649903805313527, 0.0113312124606283, 0.637676819683966,
      -0.338836606804012, 0.655101755729511, 0.827613678819582, 0.554007790131185, -0.67229630438171, -0.152451502142203,
      0.900070059153795, 0.923887407253978, -0.403651808047412, 0.78625407367079, 0.863269421991686, 0.353596793240276
  }, 1e-13, 1e-13));
    // clang-format on
    expect_each_sequence_alone(m, x, false, h0, pad_packed_sequence(out).padded, h_n, Tensor());
  }
}

// ---- (4) packed equals padded where nothing is padded; dtypes; dropout ------------------------------

TEST(NnRNNPacked, FullLengthPackEqualsThePaddedRun) {
  manual_seed(21);
  nn::LSTM m(3, 4, {.num_layers = 2, .bidirectional = true, .proj_size = 2});
  Tensor x = randn({4, 3, 3});
  nn::LSTMState s{randn({4, 3, 2}), randn({4, 3, 4})};
  auto padded = m.forward_with_state(x, s);
  auto packed = m.forward_with_state(pack_padded_sequence(x, Ints{4, 4, 4}), s);
  EXPECT_TRUE(tensor_near(packed.output.data, padded.output.reshape({12, 4}), 1e-6, 1e-6));
  EXPECT_TRUE(tensor_near(packed.h_n, padded.h_n, 1e-6, 1e-6));
  EXPECT_TRUE(tensor_near(packed.c_n, padded.c_n, 1e-6, 1e-6));
  EXPECT_EQ(packed.output.data.dtype(), kFloat32);
  // dropout between layers applies in training mode only, as for padded input
  nn::GRU g(3, 5, {.num_layers = 2, .dropout = 0.5});
  PackedSequence p = pack_padded_sequence(x, Ints{2, 4, 1}, false, false);
  EXPECT_FALSE(allclose(g.forward_with_state(p).output.data, g.forward_with_state(p).output.data));
  g.eval();
  EXPECT_TRUE(allclose(g.forward_with_state(p).output.data, g.forward_with_state(p).output.data));
}

// ---- (5) float64 gradcheck through pack -> module -> pad ---------------------------------------------

TEST(NnRNNPacked, GradcheckThroughPackModulePad) {
  const Ints lengths = {2, 3, 1};
  nn::LSTM lstm(2, 2, {.bidirectional = true});
  fill_params(lstm);
  autograd::gradcheck(
      [&](const std::vector<Tensor>& in) {
        auto [out, h_n, c_n] =
            lstm.forward_with_state(pack_padded_sequence(in[0], lengths, false, false), {in[1], in[2]});
        return std::vector<Tensor>{pad_packed_sequence(out).padded, h_n, c_n};
      },
      {lcg_tensor({3, 3, 2}, 1).requires_grad_(true), lcg_tensor({2, 3, 2}, 2).requires_grad_(true),
       lcg_tensor({2, 3, 2}, 3).requires_grad_(true)});
  nn::GRU gru(2, 2, {.num_layers = 2, .batch_first = true});
  fill_params(gru);
  autograd::gradcheck(
      [&](const std::vector<Tensor>& in) {
        auto [out, h_n] = gru.forward_with_state(pack_padded_sequence(in[0], lengths, true, false), in[1]);
        return std::vector<Tensor>{pad_packed_sequence(out, true, 0.5).padded, h_n};
      },
      {lcg_tensor({3, 3, 2}, 4).requires_grad_(true), lcg_tensor({2, 3, 2}, 5).requires_grad_(true)});
  // and the parameters get gradients from the packed run
  Tensor x = lcg_tensor({3, 3, 2}, 6);
  auto [out, h_n, c_n] = lstm.forward_with_state(pack_padded_sequence(x, lengths, false, false));
  (out.data.sum() + h_n.sum() + c_n.sum()).backward();
  for (auto& [name, p] : lstm.named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
}
