// The ModelProto: graph outputs named, the passes run (onnx/passes.cpp), then nodes, initializers
// (inline, or in an external data file), inputs and outputs written with onnx/proto.h.
#include "onnx/exporter.h"
#include "onnx/proto.h"

namespace nabla::onnx::internal {

namespace {
proto::Writer value_info(const std::string& name, DType dt, const Shape& shape, const std::vector<std::string>& sym) {
  proto::Writer shp;
  for (size_t j = 0; j < shape.size(); ++j) {
    proto::Writer dim;
    if (!sym[j].empty()) dim.bytes(2, sym[j]);  // Dimension.dim_param
    else dim.int64(1, shape[j]);                // Dimension.dim_value
    shp.message(1, dim);                        // TensorShapeProto.dim
  }
  proto::Writer tt;
  tt.int64(1, onnx_dtype(dt));  // TypeProto.Tensor.elem_type
  tt.message(2, shp);           // TypeProto.Tensor.shape
  proto::Writer type;
  type.message(1, tt);  // TypeProto.tensor_type
  proto::Writer vi;
  vi.bytes(1, name);    // ValueInfoProto.name
  vi.message(2, type);  // ValueInfoProto.type
  return vi;
}

// A ValueInfoProto of a Loop body's input or output: element type and rank, sizes unknown.
proto::Writer body_value_info(const SubGraph::IO& io) {
  proto::Writer shp;
  for (int64_t j = 0; j < io.rank; ++j) shp.message(1, proto::Writer());  // an unknown Dimension
  proto::Writer tt;
  tt.int64(1, onnx_dtype(io.dtype));  // TypeProto.Tensor.elem_type
  tt.message(2, shp);                 // TypeProto.Tensor.shape
  proto::Writer type;
  type.message(1, tt);  // TypeProto.tensor_type
  proto::Writer vi;
  vi.bytes(1, io.name);
  vi.message(2, type);
  return vi;
}

proto::Writer node_proto(const ONode& n) {
  proto::Writer nw;
  for (const auto& i : n.inputs) nw.bytes(1, i);   // NodeProto.input
  for (const auto& o : n.outputs) nw.bytes(2, o);  // NodeProto.output
  nw.bytes(3, n.name);                             // NodeProto.name
  nw.bytes(4, n.op_type);                          // NodeProto.op_type
  for (const auto& a : n.attrs) {
    proto::Writer aw;
    aw.bytes(1, a.name);  // AttributeProto.name
    switch (a.kind) {
      case OAttr::kInt:
        aw.int64(3, a.i);
        aw.int64(20, 2);
        break;  // i, type INT
      case OAttr::kFloat:
        aw.float32(2, a.f);
        aw.int64(20, 1);
        break;  // f, type FLOAT
      case OAttr::kInts:
        aw.packed_int64(8, a.ints);
        aw.int64(20, 7);
        break;  // ints, type INTS
      case OAttr::kString:
        aw.bytes(4, a.s);
        aw.int64(20, 3);
        break;               // s, type STRING
      case OAttr::kStrings:  // strings, type STRINGS
        for (const auto& x : a.strings) aw.bytes(9, x);
        aw.int64(20, 8);
        break;
      case OAttr::kGraph: {  // g, type GRAPH
        proto::Writer gw;
        for (const auto& bn : a.g->nodes) gw.message(1, node_proto(bn));          // GraphProto.node
        gw.bytes(2, "body");                                                      // GraphProto.name
        for (const auto& io : a.g->inputs) gw.message(11, body_value_info(io));   // GraphProto.input
        for (const auto& io : a.g->outputs) gw.message(12, body_value_info(io));  // GraphProto.output
        aw.message(6, gw);
        aw.int64(20, 5);
        break;
      }
    }
    nw.message(5, aw);  // NodeProto.attribute
  }
  return nw;
}

}  // namespace

std::string Exporter::serialize(const std::vector<std::string>& output_names, const std::vector<Tensor>& outputs,
                                const ExportOptions& options, std::string* data, const std::string& data_name) {
  // Graph outputs: the traced values, renamed (an input or initializer returned as is goes
  // through an Identity).
  std::vector<Value> outs;
  op_ = "(the graph output)";
  for (size_t i = 0; i < outputs.size(); ++i) {
    Value v = value_of(outputs[i]);
    const std::string& want = output_names[i];
    bool produced = false;
    for (auto& n : nodes_)
      for (auto& o : n.outputs)
        if (o == v.name) {
          o = want;
          produced = true;
        }
    if (produced) {
      for (auto& n : nodes_)
        for (auto& in : n.inputs)
          if (in == v.name) in = want;
    } else {
      bool is_input = std::any_of(inputs_.begin(), inputs_.end(), [&](const Value& in) { return in.name == v.name; });
      NABLA_CHECK(NotImplemented, is_input, "onnx::export_model: the output (", describe(outputs[i]),
                  ") does not depend on the inputs: an op the exporter does not see computed it (one "
                  "without a trace hook on tensors that take no part in autograd, or code under NoGradGuard "
                  "in forward), so the graph would return a constant");
      node("Identity", {v.name}, {}, want);
    }
    v.name = want;
    if (auto it = options.dynamic_axes.find(want); it != options.dynamic_axes.end())
      for (const auto& [d, s] : it->second) {
        int64_t dd = wrap(d, static_cast<int64_t>(v.shape.size()));
        NABLA_CHECK(ValueError, dd >= 0 && dd < static_cast<int64_t>(v.shape.size()),
                    "onnx::export_model: dynamic_axes names dim ", d, " of output '", want, "' of shape ", v.shape);
        v.sym[dd] = s;
      }
    outs.push_back(v);
  }
  if (fold_) fold_batch_norms({output_names.begin(), output_names.end()});
  prune({output_names.begin(), output_names.end()});

  proto::Writer graph;
  for (const auto& n : nodes_) graph.message(1, node_proto(n));  // GraphProto.node
  graph.bytes(2, "nabla");                                       // GraphProto.name
  // Protobuf messages stop at 2 GiB: beyond that the weights must go to an external data file.
  size_t total = 0;
  for (const auto& init : inits) total += init.data.nbytes();
  const bool too_big = total >= (size_t(2) << 30) - (size_t(64) << 20);
  NABLA_CHECK(ValueError, data || !too_big, "onnx::export_model: the weights take ", total,
              " bytes, more than a protobuf message holds (2 GiB); export_model to a file writes them to an "
              "external data file");
  if (!options.external_data && !too_big) data = nullptr;
  for (const auto& init : inits) {
    proto::Writer tw;
    for (int64_t d : init.data.sizes()) tw.int64(1, d);  // TensorProto.dims
    tw.int64(2, onnx_dtype(init.data.dtype()));          // TensorProto.data_type
    tw.bytes(8, init.name);                              // TensorProto.name
    std::string_view bytes(static_cast<const char*>(init.data.data_ptr()), init.data.nbytes());
    if (data && bytes.size() >= 1024) {
      data->resize((data->size() + 4095) / 4096 * 4096, '\0');
      auto entry = [&](const char* key, const std::string& value) {
        proto::Writer e;
        e.bytes(1, key);    // StringStringEntryProto.key
        e.bytes(2, value);  // StringStringEntryProto.value
        tw.message(13, e);  // TensorProto.external_data
      };
      entry("location", data_name);
      entry("offset", std::to_string(data->size()));
      entry("length", std::to_string(bytes.size()));
      tw.int64(14, 1);  // TensorProto.data_location = EXTERNAL
      data->append(bytes);
    } else {
      tw.bytes(9, bytes);  // TensorProto.raw_data
    }
    graph.message(5, tw);  // GraphProto.initializer
  }
  for (const auto& v : inputs_) graph.message(11, value_info(v.name, v.dtype, v.shape, v.sym));  // GraphProto.input
  for (const auto& v : outs) graph.message(12, value_info(v.name, v.dtype, v.shape, v.sym));     // GraphProto.output

  proto::Writer model;
  model.int64(1, 8);        // ModelProto.ir_version (ONNX 1.12: IR 8, opsets up to 17)
  model.bytes(2, "nabla");  // producer_name
  model.bytes(3, "0.1");    // producer_version
  model.message(7, graph);  // graph
  proto::Writer opset_id;
  opset_id.bytes(1, "");       // OperatorSetIdProto.domain (ai.onnx)
  opset_id.int64(2, opset);    // OperatorSetIdProto.version
  model.message(8, opset_id);  // opset_import
  return model.data();
}

}  // namespace nabla::onnx::internal
