def load_config(data):
    return {'retries': data['retries']}
