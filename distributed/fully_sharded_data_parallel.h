// nn::parallel::FullyShardedDataParallel (FSDP, ZeRO stage 3): parameters, gradients and optimizer
// state sharded over the ranks, as torch.distributed.fsdp.FullyShardedDataParallel with flat
// parameters. Part of nabla::distributed (it needs the collectives).
//
//   dist::init_process_group();
//   auto model = std::make_shared<nn::GPT2LMHeadModel>(config);
//   nn::parallel::FullyShardedDataParallel fsdp(model, {.auto_wrap_policy = nn::parallel::wrap_modules_named({"GPT2Block"})});
//   optim::AdamW opt(fsdp.parameters(), {.lr = 3e-4});   // the shards: 1/N of the model on each rank
//   for (auto& batch : loader) {
//     opt.zero_grad();
//     loss_of(fsdp(batch.data), batch.target).backward();  // gradients reduce-scattered to the shards
//     fsdp.clip_grad_norm_(1.0);
//     opt.step();                                          // each rank updates its shard
//   }
//   auto full = fsdp.state_dict();   // a collective: the whole model, the module's own names
//
// Units. The root module is one unit; so is every descendant the policy picks (each GPT block,
// say), and a unit holds the parameters of its subtree that no nested unit holds. A unit's
// parameters that require grad (one dtype and device per unit) are flattened into one flat
// parameter (or one per param_group value), padded to a multiple of the world size; each rank keeps its slice, the shard, as a
// leaf tensor: what parameters() returns and the optimizer steps. The module's own parameter
// tensors become views of the unit's flat buffer, whose memory exists only while the unit is
// gathered. Frozen parameters (requires_grad false) and buffers are not sharded: every rank keeps
// them whole (rank 0's, with sync_module_states).
//
// How a step flows. The root's forward gathers the root unit (all_gather of the shards into the flat
// buffer); each unit's forward pre-hook gathers that unit (while the next unit's all_gather, in the
// order the previous forward ran them, already goes on: forward_prefetch) and its forward hook frees
// it again (reshard_after_forward; the root stays gathered until its backward). A hook on each
// unit's output gathers the unit again when backward reaches it (and starts the all_gather of the
// unit before it: backward_prefetch). When every parameter of a unit has its gradient (a
// post-accumulate-grad hook moves each into the unit's flat gradient and frees it; parameters the
// root's output cannot reach count as zeros, as in PyTorch, whose flat gradient holds zeros for
// them), the flat gradient is reduce-scattered (average) to the ranks' shards and the unit is freed.
// The last unit's hook waits for the reduce-scatters and adds each result to its shard's .grad, so
// gradients accumulate over backward calls as usual. Every rank runs the same collectives in the
// same order: all must call forward and backward alike.
//
// Checkpoints: state_dict() / load_state_dict() are the whole model's (the module's names; any world
// size, or a plain module); save_sharded / load_sharded write and read each rank's shards and its
// optimizer's state plus one index (resumable on the same world size; see below).
//
// Limits, as PyTorch's flat-parameter FSDP: a parameter shared by several modules must belong to a
// unit that is an ancestor of all of them (GPT's tied token embedding and output layer: the root);
// the module's parameters hold no data while their unit is freed: read them through state_dict()
// or a FullParameters guard, not directly; the module must be called through this wrapper, and its
// units through their modules' operator() (which runs the hooks), as nabla's models do.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../nn/module.h"
#include "../optim/optimizer.h"
#include "process_group.h"

namespace nabla::nn::parallel {

// Picks the descendants that become units: (qualified name, module) -> true.
using WrapPolicy = std::function<bool(const std::string& name, const Module& module)>;
// A policy that wraps every module whose name() (its C++ class, e.g. "GPT2Block") is one of these
// (as PyTorch's transformer_auto_wrap_policy / ModuleWrapPolicy).
WrapPolicy wrap_modules_named(std::vector<std::string> names);

// torch.distributed.fsdp.MixedPrecision: param_dtype is the dtype the units are gathered and
// computed in (the shards, the optimizer's parameters, keep theirs: float32 master weights);
// reduce_dtype the one the gradients are reduce-scattered in (default: param_dtype), before they
// reach the shards in the shards' dtype. Frozen floating parameters compute in param_dtype too
// (their own-dtype values kept for the state dict); buffers keep their dtype. The model's outputs
// come in param_dtype; cast them (or the loss) as you need.
struct MixedPrecision {
  std::optional<DType> param_dtype;
  std::optional<DType> reduce_dtype;
};

struct FSDPOptions {
  distributed::ProcessGroup* process_group = nullptr;  // null: the default group
  WrapPolicy auto_wrap_policy = nullptr;               // null: the root is the only unit
  bool reshard_after_forward = true;                   // free each non-root unit after its forward
  bool forward_prefetch = true;                        // all-gather the next unit during a unit's forward
  bool backward_prefetch = true;                       // all-gather the previous unit during a unit's backward
  bool sync_module_states = true;                      // start from rank 0's parameters and buffers
  // Splits each unit's parameters into flat parameters of their own by this value (name: the
  // module's name of the parameter), so that the optimizer can give them different options:
  // parameters(group). E.g. weight decay on the matrices only:
  //   .param_group = [](const std::string&, const Tensor& p) { return p.dim() >= 2 ? 0 : 1; }
  std::function<int(const std::string& name, const Tensor& param)> param_group = nullptr;
  MixedPrecision mixed_precision = {};
};

class FullyShardedDataParallel {
 public:
  explicit FullyShardedDataParallel(std::shared_ptr<Module> module, FSDPOptions options = {});
  ~FullyShardedDataParallel();
  FullyShardedDataParallel(const FullyShardedDataParallel&) = delete;
  FullyShardedDataParallel& operator=(const FullyShardedDataParallel&) = delete;

  Tensor forward(Tensor x);
  Tensor operator()(Tensor x) { return forward(std::move(x)); }

  // The shards, one per unit with trainable parameters (1-D, this rank's slice): give these to
  // the optimizer.
  std::vector<Tensor> parameters() const;
  // Those of the flat parameters of one param_group value.
  std::vector<Tensor> parameters(int group) const;
  Module& module() { return *module_; }
  void train(bool on = true) { module_->train(on); }
  void eval() { module_->train(false); }

  // The whole model's state (a collective; every rank gets it), with the module's own names, and
  // its inverse (every rank passes the same state dict), which loads a plain module's checkpoint
  // on any world size.
  StateDict state_dict();
  void load_state_dict(const StateDict& state);

  // A sharded checkpoint in `dir` (a collective): each rank writes its shards and, given an
  // optimizer over parameters(), that optimizer's state, to its own file; rank 0's file also holds
  // the frozen parameters and buffers; then rank 0 writes the index (world size, units, each file's
  // SHA-256). Files are written atomically under a tag of their own per save (returned), and
  // index.json is replaced last, so a save that fails midway leaves the previous checkpoint whole;
  // the files of the save before the previous one go (see fsdp_checkpoint.cpp).
  std::string save_sharded(const std::string& dir, const optim::Optimizer* optimizer = nullptr);
  // Reads it back (the latest save, or the one of `tag`) on the same world size and units: each
  // rank checks its file against the index (a missing, altered or foreign file is refused by name)
  // and every rank learns whether all can load before anything changes.
  void load_sharded(const std::string& dir, optim::Optimizer* optimizer = nullptr, const std::string& tag = "");

  // The total norm of the shards' gradients over every rank (one all_reduce), as
  // nn::utils::clip_grad_norm_ over the whole model; scales them by min(1, max_norm / (norm + 1e-6)).
  double clip_grad_norm_(double max_norm, double norm_type = 2.0);

  // The module's parameters whole on every rank for the guard's lifetime (a collective when it is
  // made; none when it goes): call the module itself meanwhile (its units' hooks stand aside), e.g.
  // to evaluate or save on one rank; changes made through the parameters go back to the shards.
  // Under mixed precision the parameters are in param_dtype and read-only (nothing is written back).
  class FullParameters {
   public:
    ~FullParameters();
    FullParameters(const FullParameters&) = delete;
    FullParameters& operator=(const FullParameters&) = delete;

   private:
    friend class FullyShardedDataParallel;
    explicit FullParameters(FullyShardedDataParallel& f);
    FullyShardedDataParallel& f_;
  };
  [[nodiscard]] std::unique_ptr<FullParameters> full_parameters() {
    return std::unique_ptr<FullParameters>(new FullParameters(*this));
  }

  struct UnitInfo {
    std::string name;                 // "" for the root
    int group = 0;                    // FSDPOptions::param_group's value
    std::vector<std::string> params;  // the module's names of its flat parameter's pieces
    int64_t numel = 0, padded = 0, shard_numel = 0;
  };
  std::vector<UnitInfo> units() const;

  // Collectives so far and the time this rank's thread spent waiting for them (all_gathers it had
  // to wait for in forward and backward, the reduce-scatters at the end of backward).
  struct CommStats {
    int64_t all_gathers = 0, reduce_scatters = 0;
    double wait_seconds = 0;
  };
  const CommStats& comm_stats() const { return stats_; }
  void reset_comm_stats() { stats_ = {}; }

  struct Unit;  // fully_sharded_data_parallel.cpp

 private:
  void gather(Unit& u);  // starts the unit's all_gather unless it is gathered or under way
  void ensure_gathered(Unit& u);
  void reshard(Unit& u);
  void pre_forward(Unit& u);
  void post_forward(Unit& u, Tensor& output);
  void pre_backward(Unit& u);
  void on_grad(Unit& u, size_t k, Tensor& grad);
  void finish_backward();
  void start_iteration(const Tensor& output);
  void wait(distributed::Work& w);
  void gather_all();
  Tensor whole_flat(Unit& u);
  StateDict whole_tensors();  // what every rank holds whole: frozen parameters (their masters), buffers
  void refresh_frozen();      // mixed precision: the frozen parameters from their masters
  void write_back_all();

  std::shared_ptr<Module> module_;
  FSDPOptions options_;
  distributed::ProcessGroup* group_;
  int rank_, world_;
  std::vector<std::unique_ptr<Unit>> units_;  // the root last
  std::vector<Unit*> order_;                  // the units in the order the last forward ran them
  bool recording_order_ = true;
  bool backward_active_ = false;  // from the first pre-backward hook to the end of the backward
  bool summoned_ = false;         // a FullParameters guard is alive
  struct Frozen {
    std::string name;
    Tensor param, master;  // the module's (param_dtype) tensor and its own-dtype values
  };
  std::vector<Frozen> frozen_;  // mixed precision's frozen floating parameters
  size_t units_expecting_ = 0, units_done_ = 0;
  CommStats stats_;
};

}  // namespace nabla::nn::parallel
