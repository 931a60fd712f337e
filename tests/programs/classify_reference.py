"""torchvision's answer for the classify program test (tests/programs/test_examples.cpp).

    /usr/bin/python3 tests/programs/classify_reference.py --out DIR

Writes into DIR the images of tests/vision/make_preprocess_reference.py (photo.jpg, tall.png, ...),
for each model in MODELS a randomly initialised torchvision model's state dict (torch.manual_seed(0),
BatchNorm statistics measured on the images; DIR/<model>.pth, as torch.save writes torchvision's
weight files), and DIR/expected.json:
  {model: {"classes": 1000 or 10,
           "antialias": {image: [[index, probability], ...top 5]},
           "tv014":     {...the same with weights.transforms() as torchvision 0.14 applies it to a
                         tensor: no antialiasing}}}
Each image is read with torchvision.io.read_image (RGB) and preprocessed with the DEFAULT weights'
transforms of the model; "antialias" runs the same steps with F.resize(antialias=True).
"""
import argparse
import json
import os
import sys

# resnet18 (resize 256 bilinear) on ImageNet's 1000 classes; efficientnet_b0 (256 bicubic) with a
# 10-class head and the names in DIR/labels10.txt (classify --labels), as a fine-tuned model: among
# 10 classes the top 5 are far apart, among 1000 random ones they are close (the smallest gaps are
# printed).
# Each with the floor of its BatchNorm variances (see below).
MODELS = {"resnet18": (1000, 0.1), "efficientnet_b0": (10, 1e-3)}
LABELS10 = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
IMAGES = ["photo.jpg", "tall.png"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import torch
    import torchvision
    import torchvision.transforms.functional as F
    from torchvision.io import ImageReadMode, read_image
    from torchvision.models import get_model_weights

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "vision"))
    from make_preprocess_reference import make_images

    os.makedirs(args.out, exist_ok=True)
    images = make_images(args.out)
    with open(os.path.join(args.out, "labels10.txt"), "w") as f:
        f.write("\n".join(LABELS10) + "\n")
    expected = {}
    for name in MODELS:
        torch.manual_seed(0)
        model = torchvision.models.get_model(name, num_classes=MODELS[name][0])
        t = get_model_weights(name).DEFAULT.transforms()
        # A random model answers nearly the same for every image; with its BatchNorm statistics
        # measured on these images (and their mirror images) its answers depend on the image.
        xs = torch.stack([t(read_image(os.path.join(args.out, n), ImageReadMode.RGB)) for n in images])
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.momentum = None  # a plain average over the calibration batch
                m.reset_running_stats()
        model.train()
        with torch.no_grad():
            model(torch.cat([xs, xs.flip(-1)]))
        model.eval()
        # Eight images leave some channels with a variance near 0, which would make the model
        # hypersensitive (a pixel one level off, as a rounding at .5 gives, moving the logits by
        # 1e-3 or more); a floor keeps the answer a function of the image, not of the rounding
        # (too high a floor and the answer no longer depends on the image). The script prints the
        # margin: the smallest gap between the top 6 logits and how far one-level errors move them.
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_var.clamp_(min=MODELS[name][1])
        torch.save(model.state_dict(), os.path.join(args.out, name + ".pth"))

        def antialiased(img):
            img = F.resize(img, t.resize_size, interpolation=t.interpolation, antialias=True)
            img = F.convert_image_dtype(F.center_crop(img, t.crop_size), torch.float)
            return F.normalize(img, mean=t.mean, std=t.std)

        expected[name] = {"classes": MODELS[name][0], "antialias": {}, "tv014": {}}
        for img_name in IMAGES:
            img = read_image(os.path.join(args.out, img_name), ImageReadMode.RGB)
            for key, x in (("antialias", antialiased(img)), ("tv014", t(img))):
                with torch.no_grad():
                    logits = model(x[None])[0]
                v, i = logits.softmax(-1).topk(5)
                expected[name][key][img_name] = [[int(a), float(b)] for a, b in zip(i, v)]
                top6 = logits.topk(6).values
                gap = float((top6[:-1] - top6[1:]).min())
                # How far the logits move when 0.02% of the values are one level (1/255) off.
                g = torch.Generator().manual_seed(0)
                flip = (torch.rand(x.shape, generator=g) < 2e-4) * torch.sign(torch.randn(x.shape, generator=g))
                with torch.no_grad():
                    moved = float((model((x + flip / 255 / 0.225)[None])[0] - logits).abs().max())
                print(f"classify_reference.py: {name} {img_name} {key}: top 5 {i.tolist()}, "
                      f"smallest logit gap among the top 6 {gap:.4f}, logits move {moved:.1e} for one-level errors")
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
