"""The techniques on a GPU (marker ``gpu``; ``pytest -m gpu`` on a CUDA machine): one small
point of each checks what the CPU tests cannot - the cuDNN conv + bias + ReLU (+ add) calls in
fp16 channels-last, eager and inside a CUDA graph, autocast under graph capture, the batch
buffer as a CUDA graph's static input, and the Kineto kernel mix."""

import pytest

from tests.test_audit_topics import Root

pytestmark = pytest.mark.gpu


def test_one_point_of_each_technique_on_the_gpu():
    from yolo_sm.contract.schema import problems
    from yolo_sm.topics.techniques import analyse
    from yolo_sm.topics.techniques.collect import techniques_table

    df = techniques_table(
        device="cuda",
        warmup_ms=5,
        budget_ms=20,
        resnet_depth=50,
        resnet_imgsz=224,
        resnet_batches=(4,),
        widths=(0.25,),
        autocast_batches=(4,),
        buffer_width=0.25,
        buffer_batches=(4,),
        imgsz=320,
    )
    assert problems(df, "techniques") == []
    bad = df[df.status != "ok"]
    assert bad.empty, bad[["technique", "variant", "backend", "message"]].to_string()
    assert (df.dropna(subset=["img_per_s"]).img_per_s > 0).all()
    fusion = df[(df.technique == "fusion") & (df.backend == "eager")].set_index("variant")
    # the fused convolutions replace the bias-add, add and ReLU kernels
    k = fusion.kernels_per_forward
    assert k["conv_bias_relu"] < k["bn_folded"] <= k["bn_unfused"], k.to_dict()
    ew = fusion.elementwise_time_pct
    assert ew["conv_bias_relu"] < ew["bn_unfused"], ew.to_dict()
    assert (df[df.technique.isin(["fusion", "autocast"])].rel_err < 1e-2).all()
    graph = df[(df.technique == "batch_buffer") & (df.backend == "cudagraph")]
    assert len(graph) == 3 and graph.graph_input_copy.tolist() == [True, False, False]
    assert len(analyse.facts(Root(techniques=df))) >= 8
