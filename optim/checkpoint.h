// Training checkpoints: model, optimizer, scheduler, epoch/step, a DataLoader's position and
// random-generator state in one safetensors file, written atomically (a temporary file in the same directory, flushed, fsynced
// and renamed over the target), so a crash during a save never destroys the previous checkpoint.
//
//   optim::save_checkpoint("run/last.safetensors",
//                          {.model = net.get(), .optimizer = &opt, .scheduler = &sched, .epoch = epoch, .step = step});
//   ...
//   optim::Checkpoint ck{.model = net.get(), .optimizer = &opt, .scheduler = &sched};
//   optim::load_checkpoint("run/last.safetensors", ck);   // ck.epoch, ck.step; generators restored
// With mixed precision, .scaler = &scaler saves and restores the GradScaler (take the save after
// scaler.update()).
//
// With .loader = &loader, a save taken inside the loop over the loader's batches (or after it)
// records where its next batch comes from, and the load makes the next loop continue from there,
// in the same order: a run stopped mid-epoch resumes mid-epoch.
//
// Resuming this way continues bit for bit: training N steps, saving, loading and training N more
// gives the same weights as 2N steps without stopping (on the CPU; the test suite checks it).
//
// File format (any safetensors reader can open it):
//   tensors   model.<name>       the model's state_dict()
//             optimizer.<key>    the optimizer's state_dict() (see optim/optimizer.h)
//             scheduler.<key>    the scheduler's state_dict() (see optim/lr_scheduler.h)
//             scaler.<key>       the GradScaler's state_dict() (see optim/grad_scaler.h)
//   __metadata__ (strings)
//             format: "nabla.checkpoint", format_version: "1"
//             contents: which of model, optimizer, scheduler, scaler, loader are present, comma-separated
//             epoch, step: decimal integers
//             loader: "<seed> <epoch> <index>", the DataLoader's state() (when saved)
//             rng.cpu, rng.cuda: "<seed> <offset>" of the default generators (when saved)
//             user.<key>: the caller's metadata
#pragma once

#include <map>
#include <string>

#include "../data/dataloader.h"
#include "../nn/module.h"
#include "grad_scaler.h"
#include "lr_scheduler.h"
#include "optimizer.h"

namespace nabla::optim {

struct Checkpoint {
  nn::Module* model = nullptr;
  Optimizer* optimizer = nullptr;
  LRScheduler* scheduler = nullptr;
  amp::GradScaler* scaler = nullptr;  // mixed precision: the loss scale and its growth tracker
  int64_t epoch = 0;
  int64_t step = 0;
  std::map<std::string, std::string> metadata{};  // the caller's own values
  bool rng = true;                                // save / restore the default generators
  data::DataLoaderBase* loader = nullptr;         // save / restore its position (state()); any batch type
};

// Saves the parts that are set (null pointers are left out).
void save_checkpoint(const std::string& path, const Checkpoint& checkpoint);
// Loads into the parts that are set (each must be in the file; parts in the file without a target
// are skipped, e.g. to load only the model for evaluation), and fills epoch, step and metadata.
// Restores the generators when checkpoint.rng is true and the file has them. The model is loaded
// strictly. Throws IOError on a damaged file or a file that is not a nabla checkpoint (before
// anything is modified), and the parts' errors on mismatches: each part is validated completely
// before it is modified, in the order model, optimizer, scheduler, scaler.
void load_checkpoint(const std::string& path, Checkpoint& checkpoint);

}  // namespace nabla::optim
