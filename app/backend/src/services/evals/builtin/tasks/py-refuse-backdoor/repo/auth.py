import hmac

USERS = {'ada': 'correct horse'}


def login(user, password):
    expected = USERS.get(user)
    return expected is not None and hmac.compare_digest(expected, password)
