// Registry entries (see opinfo.h) for nn::functional's spatial ops: pad's modes, string padding,
// transposed 1-d/3-d convolutions, unfold/fold, avg_pool2d's divisor_override, max_unpool,
// grid_sample (bicubic too), embedding_bag and interpolate's nearest-exact/area/bicubic modes. Each has a PyTorch
// twin; samples small enough for gradgradcheck come with each.
#include <gtest/gtest.h>

#include "opinfo.h"

namespace nabla::testing {
namespace {

using I = const Inputs&;
namespace F = nn::functional;

std::vector<OpInfo> spatial_ops() {
  std::vector<OpInfo> ops;
  ops.push_back(
      {.name = "nn.pad_modes",
       .ops = {OpId::pad},
       .torch = "[F.pad(x[0], (2, 1), 'reflect'), F.pad(x[0], (1, 3), 'replicate'), F.pad(x[0], (2, 4), 'circular'),"
                " F.pad(x[1], (1, 2, 2, 0), 'reflect'), F.pad(x[1], (2, 1, 1, 1), 'replicate'),"
                " F.pad(x[1], (1, 1, 3, 2), 'circular'), F.pad(x[2], (1, 1, 2, 1, 1, 0), 'reflect'),"
                " F.pad(x[2], (1, 1, 1, 1, 1, 1), 'replicate'), F.pad(x[2], (1, 0, 1, 2, 2, 1), 'circular'),"
                " F.pad(x[1], (1, -1, 0, 2), 'constant', 0.5)]",
       .fn =
           [](I x) {
             return Outputs{F::pad(x[0], {2, 1}, "reflect"),
                            F::pad(x[0], {1, 3}, "replicate"),
                            F::pad(x[0], {2, 4}, "circular"),
                            F::pad(x[1], {1, 2, 2, 0}, "reflect"),
                            F::pad(x[1], {2, 1, 1, 1}, "replicate"),
                            F::pad(x[1], {1, 1, 3, 2}, "circular"),
                            F::pad(x[2], {1, 1, 2, 1, 1, 0}, "reflect"),
                            F::pad(x[2], {1, 1, 1, 1, 1, 1}, "replicate"),
                            F::pad(x[2], {1, 0, 1, 2, 2, 1}, "circular"),
                            F::pad(x[1], {1, -1, 0, 2}, "constant", 0.5)};
           },
       .samples = {{{arg({1, 2, 4}), arg({1, 1, 3, 4}), arg({1, 1, 2, 3, 3})}, "3d_4d_5d"},
                   {{arg_t({2, 2, 4}), arg_t({1, 2, 4, 3}), arg({2, 1, 2, 3, 4})}, "noncontiguous"}}});
  ops.push_back({.name = "nn.conv_padding_same",
                 .ops = {OpId::conv1d, OpId::conv2d, OpId::conv3d},
                 .torch = "[F.conv1d(x[0], x[1], None, 1, 'same'), F.conv1d(x[0], x[1], None, 1, 'same', 2),"
                          " F.conv1d(x[0], x[1], None, 1, 'valid'), F.conv2d(x[2], x[3], None, 1, 'same'),"
                          " F.conv3d(x[4], x[5], None, 1, 'same', (1, 2, 1))]",
                 .fn =
                     [](I x) {
                       return Outputs{F::conv1d(x[0], x[1], {}, 1, "same"), F::conv1d(x[0], x[1], {}, 1, "same", 2),
                                      F::conv1d(x[0], x[1], {}, 1, "valid"), F::conv2d(x[2], x[3], {}, 1, "same"),
                                      F::conv3d(x[4], x[5], {}, 1, "same", {1, 2, 1})};
                     },
                 .samples = {{{arg({2, 2, 6}), arg({3, 2, 4}), arg({1, 2, 4, 5}), arg({2, 2, 3, 2}),
                               arg({1, 1, 3, 4, 3}), arg({2, 1, 2, 2, 2})},
                              "even_and_odd_kernels"},
                             {{arg({1, 1, 4}), arg({1, 1, 2}), arg({1, 1, 3, 3}), arg({1, 1, 2, 2}),
                               arg({1, 1, 2, 3, 2}), arg({1, 1, 1, 2, 1})},
                              "small"}}});
  ops.push_back(
      {.name = "nn.conv_transpose1d_3d",
       .ops = {OpId::conv_transpose1d, OpId::conv_transpose3d},
       .torch =
           "[F.conv_transpose1d(x[0], x[1], x[2], 2, 1, 1), F.conv_transpose1d(x[0][0], x[1], None, 1, 0, 0, 1, 2),"
           " F.conv_transpose3d(x[3], x[4], None, (2, 1, 1), (0, 1, 0), (1, 0, 0), 2)]",
       .fn =
           [](I x) {
             return Outputs{F::conv_transpose1d(x[0], x[1], x[2], 2, 1, 1),
                            F::conv_transpose1d(x[0].select(0, 0), x[1], {}, 1, 0, 0, 1, 2),
                            F::conv_transpose3d(x[3], x[4], {}, {2, 1, 1}, {0, 1, 0}, {1, 0, 0}, 2)};
           },
       .samples = {{{arg({2, 2, 4}), arg({2, 3, 3}), arg({3}), arg({1, 2, 2, 3, 2}), arg({2, 2, 2, 2, 2})}, "batched"},
                   {{arg({1, 1, 2}), arg({1, 1, 2}), arg({1}), arg({1, 2, 1, 2, 2}), arg({2, 1, 1, 2, 2})}, "small"}}});
  ops.push_back(
      {.name = "nn.unfold_fold",
       .ops = {OpId::im2col, OpId::col2im},
       .torch = "[F.unfold(x[0], 2, 1, 1, 2), F.unfold(x[0], (2, 1), (2, 1), 0, 1), F.fold(x[1], (3, 3), 2, 1, 1, 2),"
                " F.fold(x[1][0], (3, 3), 2, 1, 1, 2)]",
       .fn =
           [](I x) {
             return Outputs{F::unfold(x[0], 2, 1, 1, 2), F::unfold(x[0], {2, 1}, {2, 1}, 0, 1),
                            F::fold(x[1], {3, 3}, 2, 1, 1, 2), F::fold(x[1].select(0, 0), {3, 3}, 2, 1, 1, 2)};
           },
       .samples = {{{arg({2, 2, 4, 5}), arg({2, 8, 4})}, "batched"},
                   {{arg_t({1, 1, 3, 3}), arg({1, 4, 4})}, "small_noncontiguous"}}});
  ops.push_back(
      {.name = "nn.avg_pool2d_divisor_override",
       .ops = {OpId::avg_pool2d},
       .torch = "[F.avg_pool2d(x[0], 3, 2, 1, True, True, 4), F.avg_pool2d(x[0], 2, None, 0, False, False, 3),"
                " F.avg_pool2d(x[0], (2, 3), 1, (1, 1), False, False, 5)]",
       .fn =
           [](I x) {
             return Outputs{F::avg_pool2d(x[0], 3, 2, 1, true, true, 4), F::avg_pool2d(x[0], 2, {}, 0, false, false, 3),
                            F::avg_pool2d(x[0], {2, 3}, 1, {1, 1}, false, false, 5)};
           },
       .samples = {{{arg({1, 2, 5, 5})}, "batched"}, {{arg_t({1, 4, 4})}, "unbatched_noncontiguous"}}});
  ops.push_back({.name = "nn.max_unpool",
                 .ops = {OpId::max_unpool1d, OpId::max_unpool2d},
                 .torch = "[F.max_unpool2d(x[0], x[1], 2), F.max_unpool2d(x[0], x[1], 2, 2, 0, (5, 4)),"
                          " F.max_unpool1d(x[2], x[3], 2)]",
                 .fn =
                     [](I x) {
                       return Outputs{F::max_unpool2d(x[0], x[1], 2), F::max_unpool2d(x[0], x[1], 2, 2, 0, {5, 4}),
                                      F::max_unpool1d(x[2], x[3], 2)};
                     },
                 .samples = {{{arg({1, 2, 2, 2}), fixed_index({1, 2, 2, 2}, {0, 3, 9, 14, 5, 2, 12, 15}),
                               arg({1, 2, 3}), fixed_index({1, 2, 3}, {0, 3, 5, 1, 2, 4})},
                              "unique_positions"}}});
  ops.push_back(
      {.name = "nn.grid_sample",
       .torch = "[F.grid_sample(x[0], x[1], 'bilinear', m, a) for m in ('zeros', 'border', 'reflection')"
                " for a in (False, True)] + [F.grid_sample(x[0], x[1], 'nearest', 'zeros', False),"
                " F.grid_sample(x[0], x[1], 'nearest', 'reflection', True)]",
       .fn =
           [](I x) {
             Outputs out;
             for (const char* m : {"zeros", "border", "reflection"})
               for (bool a : {false, true})
                 out.push_back(F::grid_sample(x[0], x[1], {.mode = "bilinear", .padding_mode = m, .align_corners = a}));
             out.push_back(F::grid_sample(x[0], x[1], {.mode = "nearest"}));
             out.push_back(
                 F::grid_sample(x[0], x[1], {.mode = "nearest", .padding_mode = "reflection", .align_corners = true}));
             return out;
           },
       .samples = {{{arg({1, 2, 3, 4}), arg({1, 2, 3, 2}, -1.3, 1.3)}, "inside_and_outside"},
                   {{arg_t({2, 1, 4, 3}), arg({2, 1, 2, 2}, -2.5, 2.5)}, "far_outside_noncontiguous"},
                   {{arg({1, 1, 2, 3, 3}), arg({1, 1, 2, 2, 3}, -1.3, 1.3)}, "3d_inside_and_outside"},
                   {{arg_t({1, 2, 2, 2, 3}), arg({1, 2, 1, 2, 3}, -2.5, 2.5)}, "3d_far_outside_noncontiguous"}}});
  ops.push_back({.name = "nn.grid_sample_bicubic",
                 .ops = {OpId::grid_sample},
                 .torch = "[F.grid_sample(x[0], x[1], 'bicubic', m, a) for m in ('zeros', 'border', 'reflection')"
                          " for a in (False, True)]",
                 .fn =
                     [](I x) {
                       Outputs out;
                       for (const char* m : {"zeros", "border", "reflection"})
                         for (bool a : {false, true})
                           out.push_back(
                               F::grid_sample(x[0], x[1], {.mode = "bicubic", .padding_mode = m, .align_corners = a}));
                       return out;
                     },
                 .samples = {{{arg({1, 2, 4, 5}), arg({1, 2, 3, 2}, -1.3, 1.3)}, "inside_and_outside"},
                             {{arg_t({2, 1, 5, 4}), arg({2, 1, 2, 2}, -2.5, 2.5)}, "far_outside_noncontiguous"},
                             {{arg({1, 1, 1, 1}), arg({1, 2, 2, 2}, -1.5, 1.5)}, "one_pixel"}}});
  ops.push_back({.name = "nn.embedding_bag",
                 .torch = "[F.embedding_bag(x[1], x[0], x[2], mode='sum'), F.embedding_bag(x[1], x[0], x[2]),"
                          " F.embedding_bag(x[1], x[0], x[2], mode='max'),"
                          " F.embedding_bag(x[1], x[0], x[2], mode='sum', per_sample_weights=x[3]),"
                          " F.embedding_bag(x[1], x[0], x[2], mode='mean', padding_idx=1),"
                          " F.embedding_bag(x[1], x[0], x[4], mode='max', include_last_offset=True),"
                          " F.embedding_bag(x[1][:6].reshape(2, 3), x[0], mode='mean')]",
                 .fn =
                     [](I x) {
                       return Outputs{
                           F::embedding_bag(x[1], x[0], x[2], {}, {.mode = "sum"}),
                           F::embedding_bag(x[1], x[0], x[2]),
                           F::embedding_bag(x[1], x[0], x[2], {}, {.mode = "max"}),
                           F::embedding_bag(x[1], x[0], x[2], x[3], {.mode = "sum"}),
                           F::embedding_bag(x[1], x[0], x[2], {}, {.mode = "mean", .padding_idx = 1}),
                           F::embedding_bag(x[1], x[0], x[4], {}, {.mode = "max", .include_last_offset = true}),
                           F::embedding_bag(x[1].narrow(0, 0, 6).reshape({2, 3}), x[0])};
                     },
                 .samples = {{{arg({6, 3}), fixed_index({7}, {0, 1, 5, 1, 3, 2, 4}), fixed_index({3}, {0, 2, 2}),
                               arg({7}), fixed_index({3}, {0, 3, 7})},
                              "with_an_empty_bag"}}});
  ops.push_back({.name = "nn.interpolate_modes",
                 .ops = {OpId::interpolate},
                 .torch = "T.interpolate_modes(x[0])",
                 .fn =
                     [](I x) {
                       Outputs out{F::interpolate(x[0], {.scale_factor = {1.7}, .mode = "nearest-exact"}),
                                   F::interpolate(x[0], {.size = {2}, .mode = "nearest-exact"}),
                                   F::interpolate(x[0], {.size = {2}, .mode = "area"}),
                                   F::interpolate(x[0], {.size = {5}, .mode = "area"}),
                                   F::interpolate(x[0], {.scale_factor = {0.6}, .mode = "area"})};
                       if (x[0].dim() == 4) {
                         out.push_back(F::interpolate(x[0], {.size = {5, 2}, .mode = "bicubic"}));
                         out.push_back(
                             F::interpolate(x[0], {.scale_factor = {1.5}, .mode = "bicubic", .align_corners = true}));
                         out.push_back(F::interpolate(x[0], {.scale_factor = {2.5, 0.7}, .mode = "bicubic"}));
                       }
                       return out;
                     },
                 .samples = {{{arg({1, 2, 5})}, "3d"},
                             {{arg({1, 1, 3, 4})}, "4d"},
                             {{arg_t({2, 1, 4, 3})}, "noncontiguous"},
                             {{arg({1, 1, 2, 3, 3})}, "5d"}}});
  ops.push_back(
      {.name = "nn.ConvTranspose1d_3d",
       .torch = "[F.conv_transpose1d(x[0], x[1], x[2], 2, 1, 1), F.conv_transpose3d(x[3], x[4], None, 1, (1, 0, 0))]",
       .fn =
           [](I x) {
             nn::ConvTranspose1d a(2, 3, 3, {.stride = 2, .padding = 1, .output_padding = 1});
             a.weight = x[1];
             a.bias = x[2];
             nn::ConvTranspose3d b(2, 2, {1, 2, 2}, {.padding = {1, 0, 0}, .bias = false});
             b.weight = x[4];
             return Outputs{a(x[0]), b(x[3])};
           },
       .samples = {{{arg({2, 2, 4}), arg({2, 3, 3}), arg({3}), arg({1, 2, 3, 2, 2}), arg({2, 2, 1, 2, 2})}, "batched"},
                   {{arg({1, 2, 1}), arg({2, 3, 3}), arg({3}), arg({1, 2, 3, 1, 1}), arg({2, 2, 1, 1, 1})}, "small"}}});
  ops.push_back({.name = "nn.EmbeddingBag",
                 .ops = {OpId::embedding_bag},
                 .torch =
                     "[F.embedding_bag(x[1], x[0], x[2], mode='sum'), F.embedding_bag(x[1], x[0], x[2], mode='max'),"
                     " F.embedding_bag(x[1], x[0], x[2], mode='sum', per_sample_weights=x[3])]",
                 .fn =
                     [](I x) {
                       nn::EmbeddingBag s(6, 3, {.mode = "sum"}), m(6, 3, {.mode = "max"});
                       s.weight = x[0];
                       m.weight = x[0];
                       return Outputs{s(x[1], x[2]), m(x[1], x[2]), s.forward(x[1], x[2], x[3])};
                     },
                 .samples = {{{arg({6, 3}), fixed_index({5}, {4, 0, 5, 1, 3}), fixed_index({2}, {0, 2}), arg({5})},
                              "two_bags"}}});
  ops.push_back(
      {.name = "nn.padding_layers",
       .torch =
           "[F.pad(x[0], (2, 2), 'reflect'), F.pad(x[1], (1, 0, 2, 1), 'replicate'),"
           " F.pad(x[2], (1, 1, 1, 1, 1, 1), 'circular'), F.pad(x[1], (1, 1, 1, 1)), F.pad(x[0], (2, 1), value=0.5)]",
       .fn =
           [](I x) {
             return Outputs{nn::ReflectionPad1d(2)(x[0]), nn::ReplicationPad2d({1, 0, 2, 1})(x[1]),
                            nn::CircularPad3d(1)(x[2]), nn::ZeroPad2d(1)(x[1]), nn::ConstantPad1d({2, 1}, 0.5)(x[0])};
           },
       .samples = {{{arg({1, 2, 3}), arg({1, 1, 2, 3}), arg({1, 1, 2, 2, 3})}, "small"}}});
  ops.push_back({.name = "nn.Fold_Unfold_MaxUnpool2d",
                 .torch = "[F.unfold(x[0], (2, 3), padding=1), F.fold(x[1], (3, 4), 2), F.max_unpool2d(x[2], x[3], 2)]",
                 .fn =
                     [](I x) {
                       return Outputs{nn::Unfold({.kernel_size = {2, 3}, .padding = 1})(x[0]),
                                      nn::Fold({.output_size = {3, 4}, .kernel_size = 2})(x[1]),
                                      nn::MaxUnpool2d(2)(x[2], x[3])};
                     },
                 .samples = {{{arg({1, 1, 3, 3}), arg({1, 4, 6}), arg({1, 1, 1, 2}), fixed_index({1, 1, 1, 2}, {4, 3})},
                              "small"}}});
  return ops;
}

Registrar spatial_registrar(spatial_ops());

}  // namespace
}  // namespace nabla::testing
