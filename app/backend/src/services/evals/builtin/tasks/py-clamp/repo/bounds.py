def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi + 1:
        return hi
    return x
