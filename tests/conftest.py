import matplotlib

matplotlib.use("Agg")  # figures in tests never need a display
