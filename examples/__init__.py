"""Runnable examples of perfkit; ``examples.ocr_dbnet`` is the DBNet text-detection demo pipeline."""
