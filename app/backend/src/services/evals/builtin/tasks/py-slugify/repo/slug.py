def slugify(title):
    return title
