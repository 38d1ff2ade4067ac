def parse_int(text):
    value = 0
    for ch in text:
        value = value * 10 + int(ch)
    return value
