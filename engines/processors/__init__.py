"""Face processors (FaceFusion's vocabulary): detector, landmarker, swapper, enhancer, paste-back."""
