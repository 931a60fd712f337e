# What each test case needs, as ctest labels on top of its program's folder label (ops, core, nn,
# cuda, ...). Read by ctest when it loads the tests (nabla_test_labels in CMakeLists.txt), so a
# rule applies to the cases the programs list at that moment; tests/labels_check.py (ctest
# source.test_labels) fails when a case that asks for a GPU, PyTorch or ONNX Runtime in its body
# matches no rule of that label.
#
#   ctest -L gpu           the cases that need a CUDA GPU (they skip without one)
#   ctest -LE 'gpu|slow'   a quick run on a laptop
#   NABLA_COMPLETE_SWEEPS=1 ctest -L slow   the exhaustive sweeps in full (CI samples them)
#
# Each rule is "label=regex", the regex matched against the ctest name ("Suite.Case", with the
# instantiation prefix and "/param  # GetParam() = ..." of parameterised cases).
set(NABLA_TEST_LABEL_RULES
  # gpu: skips without a CUDA GPU (NABLA_REQUIRE_CUDA); scripts/gpu-verify.sh runs these under
  # compute-sanitizer's memcheck and initcheck.
  "gpu=^(CudaAllocator|CudaAutocast|CudaCopy|CudaDeviceGpu|CudaHalf|CudaKernels|CudaStreams|DistributedNccl)\\."
  "gpu=^CudaSolver\\.Gpu"
  "gpu=^Ops/(CudaParity|CudaGradcheck)\\."
  "gpu=^Checkpointing\\.Cuda"
  # custom_kernels: nabla's own CUDA kernels, what racecheck and synccheck examine.
  "custom_kernels=^(CudaKernels|CudaCopy)\\."
  "custom_kernels=^Ops/CudaParity\\.Float32MatchesCpu/nn_"
  # nccl: the nccl backend (a world of one on one GPU; more ranks need as many GPUs).
  "nccl=^(DistributedNccl|NcclPlan)\\."
  # torch: compares with PyTorch or torchvision run by /usr/bin/python3 (skips without them,
  # fails under NABLA_REQUIRE_TORCH=1).
  "torch=^Differential\\."
  "torch=^TorchFileLive\\."
  "torch=^Examples\\.ClassifyGivesTorchvisionsTop5$"
  "torch=^Tools\\.TorchvisionResnet18$"
  "torch=^DistributedDataParallel\\.BroadcastsBuffersWhenPyTorchDoes$"
  "torch=^NablaRunLiveness\\.APyTorchRankLeftWaitingIsEnded$"
  "torch=^DistributedSampler\\.EqualsPyTorchIndexForIndex$"
  "torch=^FlashAttention\\.SdpaLongSequencesMatchTorch$"
  "torch=^Gpt2\\.(HuggingFaceCheckpointGivesItsLogits|ErrorsNameTheProblem)$"
  "torch=^(Zoo/)?(VisionModels|VisionTraining|VisionWeights)\\."
  "torch=^VisionPreprocess\\.(TableIsTorchvisions|DecodingIsTorchvisions)$"
  "torch=^(Models/)?VisionPipeline\\."
  # (and scikit-learn: the TF-IDF and bag-of-words vectorizers against its own)
  "torch=^TextVectorizers\\.MatchScikitLearn$"
  "torch=^AudioTorchaudio(Spectral)?\\."
  # ort: runs the exported model in ONNX Runtime (skips without it, fails under NABLA_REQUIRE_ORT=1).
  "ort=^Onnx\\..*OnnxRuntime$"
  "ort=^OnnxRegistry\\.OpsExportAsTheirSchemaRowsSay$"
  "ort=^MnistProgram\\.ExportsOnnxThatOnnxRuntimeRunsAsNablaDoes$"
  # tokenizers: compares with the npm tokenizers (gpt-3-encoder, js-tiktoken, tiktoken,
  # @huggingface/tokenizers) run by node (skips without them, fails under NABLA_REQUIRE_TOKENIZERS=1).
  "tokenizers=^(Bpe(Corpus|Gpt2)|HfTokenizerCorpus)\\."
  # llama_cpp: runs a GGUF nabla wrote in llama.cpp (npm's node-llama-cpp; skips without it, fails
  # under NABLA_REQUIRE_LLAMA_CPP=1).
  "llama_cpp=^Gguf\\.Gpt2RunsInLlamaCpp"
  # root: needs root (network namespaces); skips otherwise.
  "root=^NablaRun\\.TwoNodesInNetworkNamespacesJoinedByVethMakeOneJob$"
  # slow: over 10 s here, or minutes under compute-sanitizer; the exhaustive sweeps among them run
  # a sample unless NABLA_COMPLETE_SWEEPS=1.
  "slow=^HalfConversions\\.EveryFloatTo(Float16|Bfloat16)$"
  "slow=^CudaHalf\\.EveryFloatConvertsAsOnTheCpu$"
  "slow=^CudaKernels\\.MoreThanTwoBillionElementsSplitInto32bitLaunches$"
  "slow=^Onnx\\.ModelOver2GiBWritesExternalDataAndMatchesOnnxRuntime$"
  "slow=^Examples\\.FinetuneTrainsANewHead$"
  # sanitizer_skip: left out of compute-sanitizer runs: a deliberately failing cudaMalloc (the
  # tool would report it as an API error).
  "sanitizer_skip=^CudaAllocator\\.OutOfMemory"
  # racecheck_slow: 69 s under racecheck alone (its shared-memory sorts over long rows).
  "racecheck_slow=^CudaKernels\\.SortAndTopkShortLongTiesNan$"
)

# nabla_label_tests(<TEST_LIST variable> <the program's own labels>): adds the rules' labels to
# each case the variable lists (ctest's set_tests_properties replaces LABELS, so the program's
# labels are given again).
function(nabla_label_tests list base)
  string(REPLACE "," ";" base "${base}")
  foreach(test IN LISTS ${list})
    # The name without the "  # GetParam() = ..." that parameterised cases carry.
    string(REGEX REPLACE "  # GetParam\\(\\) = .*$" "" name "${test}")
    set(extra "")
    foreach(rule IN LISTS NABLA_TEST_LABEL_RULES)
      string(FIND "${rule}" "=" eq)
      math(EXPR from "${eq} + 1")
      string(SUBSTRING "${rule}" ${from} -1 regex)
      if(name MATCHES "${regex}")
        string(SUBSTRING "${rule}" 0 ${eq} label)
        list(APPEND extra ${label})
      endif()
    endforeach()
    if(extra)
      list(REMOVE_DUPLICATES extra)
      set_tests_properties("${test}" PROPERTIES LABELS "${base};${extra}")
    endif()
  endforeach()
endfunction()

foreach(entry IN LISTS NABLA_TEST_LISTS)
  string(FIND "${entry}" ":" colon)
  string(SUBSTRING "${entry}" 0 ${colon} list)
  math(EXPR from "${colon} + 1")
  string(SUBSTRING "${entry}" ${from} -1 base)
  nabla_label_tests(${list} "${base}")
endforeach()
