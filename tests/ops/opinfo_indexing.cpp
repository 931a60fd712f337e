// Registry entries (see opinfo.h) for core/indexing_ops.h and x.index({...}) with several tensor
// indices: PyTorch's placement of the broadcast dims, negative indices, masks among the indices,
// index_put with and without accumulation, take_along_dim and repeat_interleave.
#include <gtest/gtest.h>

#include "opinfo.h"

namespace nabla::testing {
namespace {

using I = const Inputs&;
using indexing::Slice;

std::vector<OpInfo> indexing_ops() {
  std::vector<OpInfo> ops;
  ops.push_back({.name = "index_multi_tensor",
                 .ops = {OpId::index},
                 .torch = "[x[0][x[1], x[2]], x[0][:, x[1], x[2]], x[0][x[1], :, x[2]], x[0][x[3], :, x[4]],"
                          " x[0][0, :, x[1]], x[0][x[5], :, x[2]], x[0][..., x[1], x[2]]]",
                 .fn =
                     [](I x) {
                       const Tensor& t = x[0];
                       return Outputs{t.index({x[1], x[2]}),
                                      t.index({Slice(), x[1], x[2]}),
                                      t.index({x[1], Slice(), x[2]}),
                                      t.index({x[3], Slice(), x[4]}),
                                      t.index({0, Slice(), x[1]}),
                                      t.index({x[5], Slice(), x[2]}),
                                      t.index({indexing::Ellipsis, x[1], x[2]})};
                     },
                 .samples = {{{arg({3, 4, 5}), fixed_index({2}, {-1, 0}), fixed_index({2}, {3, 1}),
                               fixed_index({2, 1}, {2, 0}), fixed_index({3}, {0, 3, 1}), fixed_mask({3}, {1, 0, 1})},
                              "broadcast_and_placement"},
                             {{arg_t({3, 4, 4}), fixed_index({2}, {1, 1}), fixed_index({2}, {0, -2}),
                               fixed_index({1, 1}, {1}), fixed_index({2}, {2, 0}), fixed_mask({3}, {0, 1, 1})},
                              "noncontiguous_repeated"},
                             {{arg({3, 2, 2}), fixed_index({2}, {1, -2}), fixed_index({1}, {1}),
                               fixed_index({1, 1}, {0}), fixed_index({1}, {1}), fixed_mask({3}, {1, 1, 0})},
                              "small"}}});
  ops.push_back(
      {.name = "index_put",
       .torch = "[torch.index_put(x[0], (x[1], x[2]), x[3]), T.index_put_slice(x[0], x[2], x[4]),"
                " torch.index_put(x[0], (x[1], x[2]), x[3][:1])]",
       .fn =
           [](I x) {
             Tensor y = x[0].clone();
             y.index_put_({Slice(), x[2]}, x[4]);
             return Outputs{index_put(x[0], {x[1], x[2]}, x[3]), y,
                            index_put(x[0], {x[1], x[2]}, x[3].narrow(0, 0, 1))};
           },
       .samples = {{{arg({3, 4}), fixed_index({2}, {0, -1}), fixed_index({2}, {1, 3}), arg({2}), arg({3, 2})}, "2d"}}});
  ops.push_back({.name = "index_put_accumulate",
                 .ops = {OpId::index_put},
                 .torch = "[torch.index_put(x[0], (x[1], x[2]), x[3], accumulate=True),"
                          " torch.index_put(x[0], (x[1],), x[4], accumulate=True)]",
                 .fn =
                     [](I x) {
                       return Outputs{index_put(x[0], {x[1], x[2]}, x[3], true), index_put(x[0], {x[1]}, x[4], true)};
                     },
                 .samples = {{{arg({3, 4}), fixed_index({4}, {1, 1, 0, 1}), fixed_index({4}, {2, 2, 3, 0}), arg({4}),
                               arg({4, 4})},
                              "duplicates_add_up"}}});
  ops.push_back(
      {.name = "take_along_dim",
       .torch = "[torch.take_along_dim(x[0], x[1], 1), torch.take_along_dim(x[0], x[2], 0),"
                " torch.take_along_dim(x[0], x[3])]",
       .fn =
           [](I x) {
             return Outputs{take_along_dim(x[0], x[1], 1), take_along_dim(x[0], x[2], 0), take_along_dim(x[0], x[3])};
           },
       .samples = {{{arg({3, 4}), index_arg({3, 2}, 4), index_arg({1, 4}, 3), index_arg({5}, 12)}, "2d"},
                   {{arg_t({3, 4}), index_arg({1, 6}, 4), index_arg({2, 1}, 3), index_arg({2, 2}, 12)},
                    "broadcast_noncontiguous"}}});
  ops.push_back(
      {.name = "repeat_interleave",
       .torch = "[torch.repeat_interleave(x[0], 2), torch.repeat_interleave(x[0], x[1], 1),"
                " torch.repeat_interleave(x[0], x[2], 0), torch.repeat_interleave(x[1])]",
       .fn =
           [](I x) {
             return Outputs{repeat_interleave(x[0], 2), repeat_interleave(x[0], x[1], 1),
                            repeat_interleave(x[0], x[2], 0), repeat_interleave(x[1])};
           },
       .samples = {{{arg({2, 3}), fixed_index({3}, {1, 0, 2}), fixed_index({1}, {2})}, "2d"},
                   {{arg_t({2, 3}), fixed_index({3}, {0, 0, 3}), fixed_index({2}, {1, 2})}, "noncontiguous"}}});
  ops.push_back(
      {.name = "scatter_reduce",
       .torch = "[x[0].scatter_reduce(1, x[2], x[1], r, include_self=b)"
                " for r in ('sum', 'prod', 'mean', 'amax', 'amin') for b in (True, False)]",
       .fn =
           [](I x) {
             Outputs out;
             for (const char* r : {"sum", "prod", "mean", "amax", "amin"})
               for (bool b : {true, false}) out.push_back(scatter_reduce(x[0], 1, x[2], x[1], r, b));
             return out;
           },
       .samples = {
           {{arg({3, 4}), arg({3, 5}), fixed_index({3, 5}, {0, 0, 2, 3, 0, 1, 1, 1, 2, 3, 3, 2, 1, 2, 3})},
            "duplicates_and_untouched"},
           {{arg({2, 3}), fixed_arg({2, 3}, {0.5, 0, -1.5, 0, 1.2, 2}), fixed_index({2, 3}, {0, 0, 2, 1, 1, 1})},
            "one_zero_per_slot_in_prod"},
           {{arg_t({3, 2}), arg({2, 2}), fixed_index({2, 1}, {1, 0})}, "src_larger_than_index"}}});
  return ops;
}

Registrar indexing_registrar(indexing_ops());

}  // namespace
}  // namespace nabla::testing
