"""Reads TensorBoard event files with the official protobuf runtime (Debian's python3-protobuf) and
the message definitions in proto/ (compiled here with protoc), and checks what nabla computed
against PyTorch's own algorithms run with numpy.

    read_events.py LOGDIR

Prints one JSON object: {"runs": {run: [event, ...]}, "projector": {...}, "checks": [{name, ok, detail}]}.
A run is a folder holding event files (relative to LOGDIR, "." for LOGDIR itself). Checks:
- every histogram tagged "ref/<name>" against torch.utils.tensorboard.summary.make_histogram with
  SummaryWriter's default bins, on the values in LOGDIR/<name>.npy;
- the PR curve tagged "ref_pr" against torch.utils.tensorboard.summary.compute_curve on
  LOGDIR/pr_labels.npy, pr_predictions.npy (and pr_weights.npy when present);
- projector_config.pbtxt parses as a ProjectorConfig.
"""
import glob
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def compile_protos():
    out = tempfile.mkdtemp(prefix="nabla_tb_proto_")
    protos = glob.glob(os.path.join(HERE, "proto", "*.proto"))
    subprocess.run(["protoc", "-I" + os.path.join(HERE, "proto"), "--python_out=" + out] + protos, check=True)
    sys.path.insert(0, out)


compile_protos()
import tensorflow_event_pb2 as tf  # noqa: E402
import tensorboard_plugins_pb2 as tbp  # noqa: E402
from google.protobuf import json_format, text_format  # noqa: E402

MASK_DELTA = 0xA282EAD8


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + MASK_DELTA) & 0xFFFFFFFF


def records(path):
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        (length,) = struct.unpack("<Q", data[at:at + 8])
        (len_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        assert len_crc == masked(crc32c(data[at:at + 8])), "length crc at %d" % at
        body = data[at + 12:at + 12 + length]
        (data_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        # the Python crc is slow: check it on records up to 64 KiB, the framing on all
        if length <= 65536:
            assert data_crc == masked(crc32c(body)), "data crc at %d" % at
        yield body
        at += 16 + length


PLUGIN_MESSAGES = {"hparams": tbp.HParamsPluginData, "pr_curves": tbp.PrCurvePluginData, "text": tbp.TextPluginData}


def value_json(v):
    out = {"tag": v.tag}
    kind = v.WhichOneof("value")
    out["kind"] = kind
    if kind == "simple_value":
        out["simple_value"] = v.simple_value
    elif kind == "histo":
        out["histo"] = json_format.MessageToDict(v.histo, preserving_proto_field_name=True)
    elif kind == "image":
        png = v.image.encoded_image_string
        out["image"] = {"height": v.image.height, "width": v.image.width, "colorspace": v.image.colorspace,
                        "png_bytes": len(png), "png_signature": png[:8] == b"\x89PNG\r\n\x1a\n"}
    elif kind == "tensor":
        t = v.tensor
        out["tensor"] = {"dtype": tf.DataType.Name(t.dtype), "shape": [d.size for d in t.tensor_shape.dim],
                         "float_val": list(t.float_val), "string_val": [s.decode("utf-8") for s in t.string_val]}
    if v.HasField("metadata"):
        pd = v.metadata.plugin_data
        out["plugin"] = pd.plugin_name
        if pd.plugin_name in PLUGIN_MESSAGES:
            msg = PLUGIN_MESSAGES[pd.plugin_name]()
            msg.ParseFromString(pd.content)
            out["plugin_content"] = json_format.MessageToDict(msg, preserving_proto_field_name=True)
    return out


def event_json(e):
    out = {"wall_time": e.wall_time, "step": e.step, "what": e.WhichOneof("what")}
    if out["what"] == "file_version":
        out["file_version"] = e.file_version
    elif out["what"] == "session_log":
        out["session_log"] = tf.SessionLog.SessionStatus.Name(e.session_log.status)
    elif out["what"] == "summary":
        out["values"] = [value_json(v) for v in e.summary.value]
    return out


# ---- PyTorch's algorithms (torch/utils/tensorboard/summary.py, writer.py) ----------------------------

def default_bins():
    v = 1e-12
    buckets, neg = [], []
    while v < 1e20:
        buckets.append(v)
        neg.append(-v)
        v *= 1.1
    return neg[::-1] + [0] + buckets


def make_histogram(values, bins):
    values = values.reshape(-1)
    counts, limits = np.histogram(values, bins=bins)
    cum_counts = np.cumsum(np.greater(counts, 0))  # (older PyTorch passed dtype=np.int32, which numpy 1.24 refuses)
    start, end = np.searchsorted(cum_counts, [0, cum_counts[-1] - 1], side="right")
    start = int(start)
    end = int(end) + 1
    counts = counts[start - 1:end] if start > 0 else np.concatenate([[0], counts[:end]])
    limits = limits[start:end + 1]
    return dict(min=float(values.min()), max=float(values.max()), num=float(len(values)), sum=float(values.sum()),
                sum_squares=float(values.dot(values)), bucket_limit=[float(x) for x in limits],
                bucket=[float(x) for x in counts])


def compute_curve(labels, predictions, num_thresholds, weights=None):
    _MINIMUM_COUNT = 1e-7
    if weights is None:
        weights = 1.0
    bucket_indices = np.int32(np.floor(predictions * (num_thresholds - 1)))
    float_labels = labels.astype(np.float64)
    histogram_range = (0, num_thresholds - 1)
    tp_buckets, _ = np.histogram(bucket_indices, bins=num_thresholds, range=histogram_range,
                                 weights=float_labels * weights)
    fp_buckets, _ = np.histogram(bucket_indices, bins=num_thresholds, range=histogram_range,
                                 weights=(1.0 - float_labels) * weights)
    tp = np.cumsum(tp_buckets[::-1])[::-1]
    fp = np.cumsum(fp_buckets[::-1])[::-1]
    tn = fp[0] - fp
    fn = tp[0] - tp
    precision = tp / np.maximum(_MINIMUM_COUNT, tp + fp)
    recall = tp / np.maximum(_MINIMUM_COUNT, tp + fn)
    return np.stack((tp, fp, tn, fn, precision, recall))


def close(a, b, rel):
    return a == b or abs(a - b) <= rel * max(abs(a), abs(b))


def main():
    logdir = sys.argv[1]
    runs, checks = {}, []
    for root, _, files in sorted(os.walk(logdir)):
        for f in sorted(files):
            if f.startswith("events.out.tfevents."):
                rel = os.path.relpath(root, logdir)
                events = []
                for body in records(os.path.join(root, f)):
                    e = tf.Event()
                    e.ParseFromString(body)
                    events.append(event_json(e))
                runs.setdefault(rel, []).extend(events)
    bins = default_bins()
    for events in runs.values():
        for e in events:
            for v in e.get("values", []):
                if v["tag"].startswith("ref/") and v["kind"] == "histo":
                    name = v["tag"][4:]
                    want = make_histogram(np.load(os.path.join(logdir, name + ".npy")).astype(float), bins)
                    got = v["histo"]
                    ok = (got.get("bucket_limit") == want["bucket_limit"] and got.get("bucket") == want["bucket"]
                          and all(close(got.get(k, 0.0), want[k], 1e-9) for k in ("min", "max", "num", "sum"))
                          and close(got.get("sum_squares", 0.0), want["sum_squares"], 1e-9))
                    checks.append({"name": "histogram " + name, "ok": bool(ok),
                                   "detail": "" if ok else json.dumps({"got": got, "want": want})[:2000]})
                if v["tag"] == "ref_pr":
                    labels = np.load(os.path.join(logdir, "pr_labels.npy"))
                    preds = np.load(os.path.join(logdir, "pr_predictions.npy"))
                    wpath = os.path.join(logdir, "pr_weights.npy")
                    weights = np.load(wpath) if os.path.exists(wpath) else None
                    n = v["plugin_content"]["num_thresholds"]
                    want = compute_curve(labels, preds, n, weights).astype(np.float32).reshape(-1).tolist()
                    got = v["tensor"]["float_val"]
                    ok = got == want and v["tensor"]["shape"] == [6, n]
                    checks.append({"name": "pr curve", "ok": bool(ok),
                                   "detail": "" if ok else json.dumps({"got": got, "want": want})[:2000]})
    projector = None
    pbtxt = os.path.join(logdir, "projector_config.pbtxt")
    if os.path.exists(pbtxt):
        config = text_format.Parse(open(pbtxt).read(), tbp.ProjectorConfig())
        projector = json_format.MessageToDict(config, preserving_proto_field_name=True)
    json.dump({"runs": runs, "projector": projector, "checks": checks}, sys.stdout)


if __name__ == "__main__":
    main()
