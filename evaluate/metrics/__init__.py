"""Scoring people against annotations: the results file (``coco_results`` writes ours, ``results_file`` reads
any tool's), the evaluator's own image ids (``own_ids``), CrowdPose's figures (``crowdpose_eval``), OKS
(``oks``, also the tracker's similarity) and where the AP goes (``diagnosis``, ``diagnosis_report``).
"""
