"""torchvision's ImageNet preprocessing on a few JPEG and PNG files, for nabla's preprocessing test
(tests/vision/test_preprocess.cpp).

    /usr/bin/python3 tests/vision/make_preprocess_reference.py --out DIR

Writes into DIR:
  the images: photo.jpg (500x375, quality 90, 4:2:0), tall.png (199x301 RGB), gray.png (120x90
  grayscale: upsampled by every model), wide.jpg (640x257, 4:4:4), drawn from a fixed seed
  (gradients, hard-edged shapes and noise, so that resampling and JPEG both have work to do);
  preprocess.pt (torch.save) holding a dict:
    table:   {model: [weights name, resize_size, crop_size, "bilinear"|"bicubic", mean, std]} from
             torchvision.models.get_model_weights(model).DEFAULT.transforms(), for every model name
             in MODELS_ALL
    decoded: {image: u8 (3, H, W)} from torchvision.io.read_image(path, ImageReadMode.RGB)
    outputs: {image: {model: {"tv": weights.transforms()(decoded),        torchvision 0.14's tensor
                                                                         path: no antialiasing
                              "tv_aa": the same steps with F.resize(..., antialias=True),
                              "pil": weights.transforms()(PIL image)}}}  (PIL: antialiased, uint8 maths)

Exits 0 with a message and writes nothing when torchvision cannot be imported.
"""
import argparse
import os
import sys

MODELS_ALL = [
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d", "wide_resnet50_2",
    "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn", "alexnet",
    "squeezenet1_0", "squeezenet1_1", "densenet121", "mobilenet_v2", "mobilenet_v3_large",
    "mobilenet_v3_small", "efficientnet_b0", "shufflenet_v2_x0_5", "shufflenet_v2_x1_0",
    "regnet_y_400mf", "convnext_tiny", "vit_b_16", "swin_t",
]
# The models whose pipelines are compared pixel by pixel: resize 256, 232 and 236 bilinear, and
# both bicubic ones.
MODELS = ["resnet18", "resnet50", "convnext_tiny", "efficientnet_b0", "swin_t"]


def make_images(out):
    import numpy as np
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(20231)

    def picture(w, h):
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
        base = np.stack([255 * xx / w, 255 * yy / h, 128 + 100 * np.sin(xx / 9.0) * np.cos(yy / 13.0)], axis=-1)
        img = Image.fromarray(np.clip(base, 0, 255).astype(np.uint8), "RGB")
        draw = ImageDraw.Draw(img)
        for _ in range(12):
            x0, y0 = int(rng.integers(0, w)), int(rng.integers(0, h))
            x1, y1 = x0 + int(rng.integers(4, w // 2)), y0 + int(rng.integers(4, h // 2))
            color = tuple(int(c) for c in rng.integers(0, 256, size=3))
            if rng.random() < 0.5:
                draw.rectangle([x0, y0, x1, y1], fill=color)
            else:
                draw.ellipse([x0, y0, x1, y1], fill=color)
        for k in range(0, w, 23):  # thin black and white lines: ringing for the cubic kernel
            draw.line([k, 0, k, h], fill=(255, 255, 255) if k % 2 else (0, 0, 0), width=1)
        arr = np.asarray(img).astype(np.float64) + rng.normal(0, 8, size=(h, w, 3))
        return Image.fromarray(np.clip(arr, 0, 255).round().astype(np.uint8), "RGB")

    picture(500, 375).save(os.path.join(out, "photo.jpg"), quality=90)
    picture(199, 301).save(os.path.join(out, "tall.png"))
    picture(120, 90).convert("L").save(os.path.join(out, "gray.png"))
    picture(640, 257).save(os.path.join(out, "wide.jpg"), quality=95, subsampling=0)
    return ["photo.jpg", "tall.png", "gray.png", "wide.jpg"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    try:
        import torch
        import torchvision
        import torchvision.transforms.functional as F
        from PIL import Image
        from torchvision.io import ImageReadMode, read_image
        from torchvision.models import get_model_weights
    except ImportError as e:
        print(f"make_preprocess_reference.py: skipped ({e})")
        return 0
    os.makedirs(args.out, exist_ok=True)
    names = make_images(args.out)

    table = {}
    for m in MODELS_ALL:
        w = get_model_weights(m).DEFAULT
        t = w.transforms()
        interp = {"InterpolationMode.BILINEAR": "bilinear", "InterpolationMode.BICUBIC": "bicubic"}[str(t.interpolation)]
        table[m] = [w.name, t.resize_size[0], t.crop_size[0], interp, list(t.mean), list(t.std)]

    def with_antialias(t, img):  # ImageClassification.forward with antialias=True
        img = F.resize(img, t.resize_size, interpolation=t.interpolation, antialias=True)
        img = F.center_crop(img, t.crop_size)
        img = F.convert_image_dtype(img, torch.float)
        return F.normalize(img, mean=t.mean, std=t.std)

    decoded, outputs = {}, {}
    for n in names:
        path = os.path.join(args.out, n)
        img = read_image(path, ImageReadMode.RGB)  # u8 (3, H, W)
        decoded[n] = img
        pil = Image.open(path).convert("RGB")
        outputs[n] = {}
        for m in MODELS:
            t = get_model_weights(m).DEFAULT.transforms()
            outputs[n][m] = {"tv": t(img), "tv_aa": with_antialias(t, img), "pil": t(pil)}
    torch.save({"table": table, "decoded": decoded, "outputs": outputs, "torchvision": torchvision.__version__},
               os.path.join(args.out, "preprocess.pt"))
    print(f"make_preprocess_reference.py: {len(names)} images, {len(MODELS)} pipelines -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
